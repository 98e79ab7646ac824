"""The docs site (mkdocs.yml, `bash scripts/docs`): it builds in strict mode, its API reference
shows every public name of `sim`, `sim.api` and `policies.kit`, every notebook has a page, and
a broken link or anchor fails the build. Needs the `[docs]` extra (in `[dev]`); each build
takes about 10 s on 2 cores."""

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

for _package in ("mkdocs", "material", "mkdocstrings_handlers.python", "mkdocs_jupyter"):
    pytest.importorskip(_package, reason="the docs site needs dcsim's [docs] extra")

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = {"sim": "reference/sim", "sim.api": "reference/api", "policies.kit": "reference/kit"}


def build(site_dir: str, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`bash scripts/docs SITE_DIR` in the checkout `root`, this interpreter first on the PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", str(root / "scripts" / "docs"), site_dir],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = build(str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_site_has_a_page_for_every_doc_the_readme_and_the_notebooks(site: Path) -> None:
    pages = [f"{p.stem}/index.html" for p in (ROOT / "docs").glob("*.md")]
    pages += [f"notebooks/{p.stem}/index.html" for p in (ROOT / "notebooks").glob("*.ipynb")]
    pages += ["index.html", "notebooks/index.html"]
    assert [page for page in pages if not (site / page).is_file()] == []
    assert "A discrete-event simulator of GPU datacenters" in (site / "index.html").read_text()
    notebook = (site / "notebooks/space_vs_time_shifting/index.html").read_text()
    assert "sim.load_scenario" in notebook  # its code cells, rendered


@pytest.mark.parametrize("module", REFERENCE)
def test_the_api_reference_shows_every_public_name(site: Path, module: str) -> None:
    page = (site / REFERENCE[module] / "index.html").read_text()
    public = importlib.import_module(module).__all__
    assert [name for name in public if f'id="{module}.{name}"' not in page] == []


def test_the_reference_renders_the_docstrings(site: Path) -> None:
    simulate = "Run <code>scenario</code> to its horizon"
    assert simulate in (site / "reference/sim/index.html").read_text()
    assert "Start a pending (or deferred) job" in (site / "reference/api/index.html").read_text()


def test_a_broken_link_or_anchor_fails_the_strict_build(tmp_path: Path) -> None:
    # the repository as symlinks, but for a page with broken links (the checkout is untouched)
    for entry in ROOT.iterdir():
        if entry.name not in {"docs", ".git", "site"}:
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / "docs").mkdir()
    for entry in (ROOT / "docs").iterdir():
        (tmp_path / "docs" / entry.name).symlink_to(entry)
    page = tmp_path / "docs" / "wan.md"
    text = page.read_text()
    page.unlink()
    page.write_text(
        text + "\n[a page](missing.md) [an anchor](mig.md#missing) [code](../sim/api.py)\n"
    )
    done = build(str(tmp_path / "site"), root=tmp_path)
    assert done.returncode != 0
    for warning in ("'missing.md'", "does not contain an anchor '#missing'", "'../sim/api.py'"):
        assert warning in done.stderr


def test_a_link_is_the_linked_files_path_in_the_repository_mapped_onto_the_site() -> None:
    spec = importlib.util.spec_from_file_location("hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    # (link as written in the page's file, the page's path on the site) -> link on the site
    assert hooks.site_link("mig.md#profiles", "wan.md") == "mig.md#profiles"
    assert hooks.site_link("../notebooks/spot_capacity.ipynb", "wan.md") == (
        "notebooks/spot_capacity.ipynb"
    )
    assert hooks.site_link("../docs/wan.md", "notebooks/index.md") == "../wan.md"  # its README
    assert hooks.site_link("docs/wan.md#routes", "index.md") == "wan.md#routes"  # the README
    # not on the site: left as written, for the strict build to report
    assert hooks.site_link("../scenarios/quickstart.toml", "wan.md") == (
        "../scenarios/quickstart.toml"
    )
    assert hooks.site_link("https://example.org/a.md", "wan.md") == "https://example.org/a.md"
    assert hooks.site_link("#routes", "wan.md") == "#routes"
