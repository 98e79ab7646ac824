"""MkDocs hooks (`hooks:` in mkdocs.yml): the site shows files of the repository that live
outside `docs/`, without copies of them in git, and keeps the pages' links written as paths
in the repository, so that a link works both on the site and when the page is read in the
repository (an editor, a forge's file view).

- `README.md` is the site's home page (`index.md`), `notebooks/README.md` the notebooks'
  index and `notebooks/*.ipynb` their pages (rendered, not executed, by mkdocs-jupyter).
- A relative link `[text](path)` in any page is resolved in the repository from the page's
  own file and rewritten to where that file is on the site: `docs/X` at `X`, the files
  above at their place. A link to any other file of the repository (a scenario, a script,
  a module under `sim/`) is left as written, and the strict build fails on it as a broken
  link: such files are named in code spans (`scenarios/quickstart.toml`), not linked.
"""

import posixpath
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent
DOCS_DIR = "docs"

_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_EXTERNAL = re.compile(r"^([a-z][a-z0-9+.-]*:|#|/)", re.IGNORECASE)


def _mounted() -> dict[str, str]:
    """The files outside `docs/` that the site shows: repository path -> path on the site."""
    mounted = {"README.md": "index.md", "notebooks/README.md": "notebooks/index.md"}
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        path = notebook.relative_to(ROOT).as_posix()
        mounted[path] = path
    return mounted


MOUNTED = _mounted()
_REPO_PATH = {site: repo for repo, site in MOUNTED.items()}


def repo_path(site_path: str) -> str:
    """Where the page at `site_path` (relative to the site's root) lives in the repository."""
    return _REPO_PATH.get(site_path, posixpath.join(DOCS_DIR, site_path))


def site_path(path: str) -> str | None:
    """Where the repository's file `path` is on the site; None if the site does not have it."""
    if path in MOUNTED:
        return MOUNTED[path]
    if path.startswith(DOCS_DIR + "/"):
        return path.removeprefix(DOCS_DIR + "/")
    return None


def site_link(target: str, page: str) -> str:
    """The link `target`, written in the repository's file of the page at site path `page`,
    as the page's link on the site (unchanged if external, an anchor, or not on the site)."""
    if _EXTERNAL.match(target):
        return target
    path, hash_, anchor = target.partition("#")
    source = repo_path(page)
    linked = site_path(posixpath.normpath(posixpath.join(posixpath.dirname(source), path)))
    if linked is None:
        return target
    relative = posixpath.relpath(linked, posixpath.dirname(page) or ".")
    return relative + hash_ + anchor


# before mkdocs-jupyter's on_files (priority 0), which turns the notebooks into pages
@event_priority(50)
def on_files(files: Files, config: MkDocsConfig) -> Files:
    for repo, site in MOUNTED.items():
        if repo == site:
            # a plain file under the repository's root: mkdocs-jupyter reads a notebook's
            # path from `src_dir`, which a generated file lacks
            files.append(File(site, str(ROOT), config.site_dir, config.use_directory_urls))
        else:
            files.append(File.generated(config, site, abs_src_path=str(ROOT / repo)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return _LINK.sub(
        lambda m: m[1] + site_link(m[2], page.file.src_uri) + m[3],
        markdown,
    )
