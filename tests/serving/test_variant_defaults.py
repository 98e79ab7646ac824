"""What a service's variant takes from the service when it leaves a key out
(docs/inference-levers.md, "In a scenario")."""

from __future__ import annotations

from tests.conftest import site
from tests.engine.test_services import CHAT, serving_scenario

LARGE = "Llama-3.1-70B-Instruct"
SMALL = "Llama-3.1-8B-Instruct"


def test_the_docs_mig_variant_of_a_four_gpu_service_holds_one_slice(tmp_path):
    """docs/inference-levers.md's example: the 70B service on 4 H100s, a variant `8b` on
    one whole H100 and a variant `8b-mig` on a 3g.40gb slice that gives no
    gpus_per_replica: it is accepted, its replica holding one slice (not the service's 4)."""
    mig_site = site(
        gpus=[
            {"model": "H100-SXM", "count": 8},
            {"model": "A100-80GB", "count": 2, "mig": ["3g.40gb", "2g.20gb", "2g.20gb"]},
        ]
    )
    service = {
        **CHAT,
        "model": LARGE,
        "gpus_per_replica": 4,
        "sites": ["a"],
        "variants": [
            {"name": "8b", "model": SMALL, "gpus_per_replica": 1},
            {"name": "8b-mig", "model": SMALL, "gpu": "A100-80GB", "mig_profile": "3g.40gb"},
        ],
    }
    scenario = serving_scenario(tmp_path, services=[service], sites=[mig_site])
    specs = {v.name: v.gpus_per_replica for v in scenario.services[0].variant_specs()}
    assert specs == {LARGE: 4, "8b": 1, "8b-mig": 1}
