"""GPU prices (sim.models.pricing, sim/data/gpu_prices.toml): the shipped table, currency
conversion, scenario overrides, and the errors a bad table or a bad scenario gets."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from sim.config.market import PriceConfig
from sim.models import hardware
from sim.models.pricing import (
    DEFAULT_CURRENCY,
    PRICE_KINDS,
    PriceBook,
    currencies,
    gpu_prices,
    parse_price_table,
    usd_rate,
)

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

CURRENCIES = """
[currencies]
date = "2026-10-30"
source = "ECB"
[currencies.per_eur]
EUR = 1.0
USD = 1.25
"""


def table_text(entry: str) -> str:
    return CURRENCIES + "\n[gpu.A100-80GB]\n" + entry


# --- the shipped table -----------------------------------------------------------------------


def test_every_catalog_price_is_positive_with_source_and_date():
    assert gpu_prices(), "the table prices at least one GPU model"
    for gpu_model, price in gpu_prices().items():
        assert gpu_model in hardware.GPU_CATALOG
        assert price.gpu_model == gpu_model
        assert price.on_demand_usd_per_gpu_h > 0
        for optional in (price.reserved_usd_per_gpu_h, price.spot_usd_per_gpu_h):
            assert optional is None or optional > 0
        assert price.source.strip()
        assert DATE.match(price.date), f"{gpu_model}: date {price.date!r} is not YYYY-MM-DD"


def test_reserved_and_spot_never_dearer_than_on_demand_in_the_table():
    for price in gpu_prices().values():
        for cheaper in (price.reserved_usd_per_gpu_h, price.spot_usd_per_gpu_h):
            if cheaper is not None:
                assert cheaper <= price.on_demand_usd_per_gpu_h


def test_an_eight_gpu_instance_is_priced_per_gpu():
    # AWS p5.48xlarge, $55.04 an hour for 8 H100 (gpu_prices.toml)
    assert gpu_prices()["H100-SXM"].on_demand_usd_per_gpu_h == pytest.approx(55.04 / 8)


def test_currencies_include_eur_usd_gbp_and_usd_is_the_unit():
    assert {"EUR", "USD", "GBP"} <= set(currencies())
    assert DEFAULT_CURRENCY == "EUR"
    assert usd_rate("USD") == 1.0


def test_usd_rate_is_the_ratio_of_the_ecb_rates_per_euro():
    # ECB 2026-10-30: 1 EUR = 1.1172 USD = 0.8338 GBP
    assert usd_rate("EUR") == pytest.approx(1 / 1.1172)
    assert usd_rate("GBP") == pytest.approx(0.8338 / 1.1172)


# --- conversion and overrides ------------------------------------------------------------------


def test_a_price_in_gbp_is_the_usd_price_times_the_rate():
    usd = gpu_prices()["H100-SXM"].on_demand_usd_per_gpu_h
    assert PriceBook("GBP").per_gpu_h("H100-SXM") == pytest.approx(usd * usd_rate("GBP"))
    assert PriceBook("USD").per_gpu_h("H100-SXM") == pytest.approx(usd)


def test_the_default_book_prices_on_demand_in_euro():
    book = PriceBook()
    usd = gpu_prices()["A100-80GB"].on_demand_usd_per_gpu_h
    assert book.currency == "EUR"
    assert book.per_gpu_h("A100-80GB") == pytest.approx(usd * usd_rate("EUR"))


def test_the_book_prices_its_configured_kind():
    book = PriceBook("USD", PriceConfig(kind="spot"))
    assert book.per_gpu_h("H200") == pytest.approx(gpu_prices()["H200"].spot_usd_per_gpu_h)
    assert book.per_gpu_h("H200", kind="on_demand") == pytest.approx(
        gpu_prices()["H200"].on_demand_usd_per_gpu_h
    )


def test_an_override_wins_over_the_table_in_the_scenarios_currency():
    book = PriceBook("GBP", PriceConfig(per_gpu_h={"H100-SXM": 2.5}))
    assert book.per_gpu_h("H100-SXM") == 2.5
    assert book.per_gpu_h("H100-SXM", kind="spot") == 2.5


def test_an_override_prices_a_model_the_table_lacks():
    assert "T4" not in gpu_prices()
    assert PriceBook(config=PriceConfig(per_gpu_h={"T4": 0.4})).per_gpu_h("T4") == 0.4


def test_missing_lists_each_unpriced_model_once_in_order():
    book = PriceBook(config=PriceConfig(per_gpu_h={"V100": 1.0}))
    assert book.missing(["T4", "H100-SXM", "V100", "P100", "T4"]) == ["T4", "P100"]


def test_missing_follows_the_books_kind():
    assert "A100-80GB" in PriceBook(config=PriceConfig(kind="spot")).missing(["A100-80GB"])
    assert PriceBook().missing(["A100-80GB"]) == []


def test_meta_records_currency_kind_rate_overrides_and_dates():
    meta = PriceBook("GBP", PriceConfig(kind="spot", per_gpu_h={"T4": 0.3})).meta()
    assert meta["currency"] == "GBP"
    assert meta["kind"] == "spot"
    assert meta["usd_rate"] == pytest.approx(usd_rate("GBP"))
    assert meta["usd_rate_date"] == "2026-10-30"
    assert "ECB" in meta["usd_rate_source"]
    assert meta["overrides_per_gpu_h"] == {"T4": 0.3}
    assert meta["table_dates"] == sorted({p.date for p in gpu_prices().values()})


# --- errors ------------------------------------------------------------------------------------


def test_an_unknown_currency_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^unknown currency 'XYZ'; known: \['CHF', 'EUR'"):
        PriceBook("XYZ")
    with pytest.raises(ValueError, match="unknown currency 'usd'"):
        usd_rate("usd")


def test_an_unpriced_model_names_the_model_and_kind():
    with pytest.raises(ValueError, match=r"^no on_demand price for GPU model 'T4' in gpu_prices"):
        PriceBook().per_gpu_h("T4")
    with pytest.raises(ValueError, match=r"no reserved price for GPU model 'H100-SXM'"):
        PriceBook().per_gpu_h("H100-SXM", kind="reserved")
    with pytest.raises(ValueError, match=r"no on_demand price for GPU model 'B300'"):
        PriceBook().per_gpu_h("B300")


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match=r"^unknown price kind 'hourly'; known: \['on_demand'"):
        PriceBook().per_gpu_h("H100-SXM", kind="hourly")


def test_price_kinds_are_the_config_kinds():
    for kind in PRICE_KINDS:
        assert PriceConfig(kind=kind).kind == kind
    with pytest.raises(ValidationError, match="kind"):
        PriceConfig(kind="hourly")  # type: ignore[arg-type]


def test_config_refuses_a_negative_price_naming_the_model():
    with pytest.raises(ValidationError, match=r"per_gpu_h\.H100-SXM must be >= 0, got -1\.0"):
        PriceConfig(per_gpu_h={"H100-SXM": -1.0})


def test_config_refuses_a_non_finite_price():
    with pytest.raises(ValidationError, match="finite number"):
        PriceConfig(per_gpu_h={"H100-SXM": float("nan")})
    with pytest.raises(ValidationError, match="finite number"):
        PriceConfig(per_gpu_h={"H100-SXM": float("inf")})


def test_config_refuses_an_unknown_gpu_model_naming_it():
    with pytest.raises(ValidationError, match=r"per_gpu_h\.H100-SMX: unknown GPU model; known:"):
        PriceConfig(per_gpu_h={"H100-SMX": 2.0})


def test_config_refuses_unknown_keys():
    with pytest.raises(ValidationError, match="currency"):
        PriceConfig(currency="USD")  # type: ignore[call-arg]


def test_a_free_override_is_allowed():
    assert PriceBook(config=PriceConfig(per_gpu_h={"A40": 0.0})).per_gpu_h("A40") == 0.0


# --- the table's own validation ----------------------------------------------------------------


def test_a_valid_table_parses():
    table = parse_price_table(
        table_text('on_demand = 4.0\nreserved = 3.0\nsource = "s"\ndate = "2026-01-01"\n')
    )
    price = table.prices["A100-80GB"]
    assert (price.on_demand_usd_per_gpu_h, price.reserved_usd_per_gpu_h) == (4.0, 3.0)
    assert price.spot_usd_per_gpu_h is None
    assert table.per_eur["USD"] == 1.25


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('source = "s"\ndate = "d"\n', r"\.on_demand is required"),
        (
            'on_demand = 0.0\nsource = "s"\ndate = "d"\n',
            r"\.on_demand must be finite and > 0 \(USD per GPU-hour\), got 0\.0",
        ),
        ('on_demand = "2"\nsource = "s"\ndate = "d"\n', r"\.on_demand must be a number"),
        ('on_demand = 2.0\ndate = "d"\n', r"\.source must be a non-empty string"),
        ('on_demand = 2.0\nsource = "s"\n', r"\.date must be a non-empty string"),
        (
            'on_demand = 2.0\nreserved = 2.5\nsource = "s"\ndate = "d"\n',
            r"\.reserved = 2\.5 exceeds on_demand = 2\.0",
        ),
        ('on_demand = 2.0\nsource = "s"\ndate = "d"\nhourly = 1\n', r": unknown keys \['hourly'\]"),
    ],
)
def test_a_bad_table_entry_is_refused_naming_file_and_key(entry: str, message: str):
    with pytest.raises(ValueError, match=rf"^gpu_prices\.toml: gpu\.A100-80GB{message}"):
        parse_price_table(table_text(entry))


def test_a_table_entry_for_a_gpu_outside_the_catalog_is_refused():
    text = CURRENCIES + '\n[gpu.B300]\non_demand = 9.0\nsource = "s"\ndate = "d"\n'
    with pytest.raises(ValueError, match=r"^gpu_prices.toml: gpu\.B300: not a GPU of gpus.toml"):
        parse_price_table(text)


def test_the_exchange_rates_need_eur_at_one_and_usd():
    no_usd = CURRENCIES.replace("USD = 1.25\n", "")
    with pytest.raises(ValueError, match=r"currencies\.per_eur: USD is required"):
        parse_price_table(no_usd)
    with pytest.raises(
        ValueError, match=r"currencies\.per_eur\.USD must be finite and > 0 \(USD per EUR\)"
    ):
        parse_price_table(CURRENCIES.replace("USD = 1.25", "USD = -1.25"))
    eur_not_one = CURRENCIES.replace("EUR = 1.0", "EUR = 1.1")
    with pytest.raises(ValueError, match=r"currencies\.per_eur\.EUR must be 1\.0"):
        parse_price_table(eur_not_one)
