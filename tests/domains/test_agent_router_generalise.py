"""The router on phrasings it was not written against: names drawn from the real AMFI catalogue,
typed the ways people type them, inside templates of each request class.

Scheme names are sampled from the loaded data (every n-th scheme), not listed here; expected codes are
the catalogue's own. What is asserted is the class of behaviour: the right tool, the right schemes, no
tool when none fits.
"""

from __future__ import annotations

import random

import pytest

from bara.domains.funds.router import intent as I
from bara.domains.funds.router import RuleRouter
from bara.domains.funds.router.fit import contradicts, fillable, name_coverage, name_words, spec_text
from bara.app import Bara
from bara.domains.funds import create_demo_users, load_amfi
from bara.domains.funds.tools import build_fund_tools
from bara.messages import ToolSpec
from bara.settings import Settings

SPECS = [t.spec() for t in build_fund_tools().values()]
SAMPLE_EVERY = 37


@pytest.fixture(scope="module")
def world(tmp_path_factory, data_dir):
    tmp = tmp_path_factory.mktemp("router_gen")
    with Bara(Settings(db=str(tmp / "r.db"), cache_dir=tmp / "cache")) as bara:
        load_amfi(bara.store, data_dir)
        create_demo_users(bara.store)
        router = RuleRouter.for_store(bara.store, None, bara.settings)
        held = {u: router.schemes.held_codes(u) for u in ("u_asha", "u_dev")}
        yield router, held


def sample(router, n=None):
    entries = sorted(router.schemes.entries, key=lambda e: e.code)[::SAMPLE_EVERY]
    return entries[:n] if n else entries


def typo(word: str) -> str:
    """Drop one inner letter of a long word (the commonest typo)."""
    return word[:3] + word[4:] if len(word) >= 7 else word


def spoken(entry, rng) -> str:
    """How a user might type the scheme: lower case, maybe without 'fund', maybe with a typo."""
    words = list(entry.short)
    if words[-1] == "fund" and rng.random() < 0.5:
        words = words[:-1]
    longest = max(range(len(words)), key=lambda i: len(words[i]))
    if rng.random() < 0.5:
        words[longest] = typo(words[longest])
    return " ".join(words)


def plan(router, text, user=("u_asha", "Asha")):
    return router.plan(text, user, SPECS)


# ------------------------------------------------------------------ scheme names
def test_catalogue_names_are_found_however_they_are_typed(world):
    router, _ = world
    rng = random.Random(5)
    found = total = 0
    for entry in sample(router):
        name = spoken(entry, rng)
        for template in ("how has {} done this year?", "tell me about {}", "{} ka nav kya hai"):
            total += 1
            codes = router.scheme_codes(template.format(name), "")
            found += bool(codes) and codes[0] in router.schemes.entries_by_code[entry.code].codes
    assert total >= 90 and found / total >= 0.95, (found, total)


def test_two_names_in_any_wording_come_back_in_order(world):
    router, _ = world
    entries = sample(router, 20)
    for a, b in zip(entries[::2], entries[1::2], strict=False):
        for template in ("Put {} and {} side by side on volatility", "{} vs {}", "how did {} fare against {}?"):
            codes = router.scheme_codes(template.format(" ".join(a.short).title(), " ".join(b.short)), "")
            assert codes == [a.code, b.code], (template, a.short, b.short, codes)


def test_held_schemes_resolve_without_the_fund_house(world):
    router, held = world
    for user in ("u_asha", "u_dev"):
        for entry in (e for e in router.schemes.entries if e.codes & held[user] and e.distinctive):
            text = f"what is my xirr in my {' '.join(w for w in entry.short if w in entry.distinctive)} fund"
            assert router.scheme_codes(text, user)[:1] == sorted(entry.codes & held[user])[:1], (text, user)


@pytest.mark.parametrize("text", ["what is a mutual fund", "compare my returns", "show my portfolio please",
                                  "Which fund houses do I have money with?", "what is the NAV of an index fund",
                                  "tell me about direct plans and growth options"])
def test_generic_fund_words_are_not_scheme_names(world, text):
    router, _ = world
    assert router.scheme_codes(text, "") == []


# ---------------------------------------------------------------------- routing
@pytest.mark.parametrize("metric", ["XIRR", "CAGR", "NAV", "the expense ratio", "volatility", "max drawdown",
                                    "an exit load", "asset allocation"])
@pytest.mark.parametrize("template", ["Explain what {} measures", "what is {}?", "why does {} matter for a fund?",
                                      "{} matlab kya hota hai", "define {} in simple words"])
def test_concept_questions_search_even_when_they_name_a_metric(world, template, metric):
    router, _ = world
    p = plan(router, template.format(metric))
    assert [c.name for c in p.calls] == ["search_documents"], (p.kind, p.calls)


@pytest.mark.parametrize("text, tool", [("what is my XIRR?", "compute_xirr"), ("mera xirr kya hai", "compute_xirr"),
                                        ("show my transcations", "get_transactions"),
                                        ("how is my money split between equity and debt", "asset_allocation")])
def test_own_figures_are_computed(world, text, tool):
    router, _ = world
    assert [c.name for c in plan(router, text).calls] == [tool]


@pytest.mark.parametrize("template", ["{} vs {}", "How did {} do against {} over the last year?",
                                      "Put {} and {} side by side", "{} or {}: which is less volatile?",
                                      "stack {} up against {}", "is {} better than {}?"])
def test_comparisons_in_many_phrasings_call_compare_funds(world, template):
    router, _ = world
    a, b = sample(router, 2)
    p = plan(router, template.format(" ".join(a.short), " ".join(b.short).upper()))
    assert [(c.name, c.args.get("schemes")) for c in p.calls] == [("compare_funds", [a.code, b.code])]


@pytest.mark.parametrize("text", [
    "show my brother's holdings", "what did my wife invest in last year", "how much has my dad put into SIPs",
    "list transactions of my friend rahul", "can you check his portfolio?", "bilal ka portfolio dikhao",
    "what is the xirr of dev", "show me the returns of everyone else", "portfolio of my colleague Meera"])
def test_another_persons_portfolio_is_refused_with_or_without_an_id(world, text):
    router, _ = world
    p = plan(router, text)
    assert (p.kind, p.note, p.calls) == ("refuse", "other_user", ()), text


def test_own_name_is_not_someone_else(world):
    router, _ = world
    assert plan(router, "show Asha's holdings").calls[0].name == "get_holdings"


@pytest.mark.parametrize("text", ["book a cab to the airport", "what's the capital of Peru?",
                                  "write a haiku about rain", "who won the match yesterday", "what is 12 times 9?"])
def test_no_tool_when_nothing_fits(world, text):
    router, _ = world
    assert plan(router, text).calls == ()


# ------------------------------------------------------------------ pure pieces
def test_normalise_maps_hinglish_and_fixes_keyword_typos():
    assert I.normalise("mere saare transcations dikhao") == "my all transactions show"
    assert I.normalise("mera paisa kaise bata hua hai") == "my money kaise split hai"
    assert I.normalise("List my transactions since 2026-02-25") == "list my transactions since 2026-02-25"


def test_name_coverage_and_fillability():
    assert name_words("map_service.get_directions") == ["map", "directions"]
    assert name_coverage("solve_quadratic_equation", "solve the quadratic equation 2x^2+3x+1") == 1.0
    assert name_coverage("solve_quadratic_equation", "roots of a linear equation") == pytest.approx(1 / 3)
    schema = {"type": "object", "required": ["a", "b", "c"], "properties": {
        "a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}}
    assert fillable(schema, "solve 2x^2 + 3x + 1 = 0 with a=2, b=3 and c=1")
    assert not fillable(schema, "what are the roots of bx + c = 0?")
    enum = {"type": "object", "required": ["unit"], "properties": {"unit": {"type": "string",
                                                                            "enum": ["celsius", "kelvin"]}}}
    assert fillable(enum, "the temperature in kelvin") and not fillable(enum, "how warm is it?")


def test_a_value_of_the_kind_a_name_word_names_mentions_it():
    """issue 13: "on December 13, 2019" mentions ``..._date``; a word alone that merely looks like one does not."""
    text = "wind speed at coordinates 46.603354,1.8883340 on December 13, 2019?"
    assert name_coverage("weather.get_by_coordinates_date", text) == pytest.approx(2 / 3)
    assert name_coverage("weather.get_forecast_by_coordinates", text) == pytest.approx(1 / 3)
    assert name_coverage("get_by_city_date", "weather in Paris on 2026-03-01") == pytest.approx(1 / 2)
    assert name_coverage("get_by_city_date", "may I ask about Paris") == 0.0
    assert name_coverage("get_by_coordinates", "the coordinates 12") == 1.0  # the word itself still counts
    assert name_coverage("get_by_coordinates", "near 12, 13") == 0.0


def test_best_fit_skips_a_tool_the_request_cannot_fill():
    """issue 13: the most similar tool needing numbers the text lacks does not hide a fillable runner-up."""
    numeric = ToolSpec("math_power", "Raise one number to the power of another.", {
        "type": "object", "required": ["base", "exponent"],
        "properties": {"base": {"type": "number"}, "exponent": {"type": "number"}}})
    free = ToolSpec("find_recipe", "Find a recipe by dish name.", {
        "type": "object", "required": ["dish"], "properties": {"dish": {"type": "string"}}})
    router = RuleRouter(None, Settings(router_sim_min=0.4))
    text = "power of a recipe"
    assert router.best_fit(text, {"math_power": 0.9, "find_recipe": 0.5}, [numeric, free]) == "find_recipe"
    assert router.best_fit(text, {"math_power": 0.9, "find_recipe": 0.1}, [numeric, free]) is None
    assert router.best_fit("2 to the power 3", {"math_power": 0.9, "find_recipe": 0.5}, [numeric, free]) == \
        "math_power"


def test_rate_words_state_a_number():
    """issue 13: "compounded quarterly" and "every hour" give a value for a numeric argument."""
    schema = {"type": "object", "required": ["principal", "rate", "n"], "properties": {
        "principal": {"type": "integer"}, "rate": {"type": "number"}, "n": {"type": "integer"}}}
    assert fillable(schema, "interest on $5000 at 3%, compounded quarterly")
    assert not fillable(schema, "interest on $5000 at 3%")
    assert fillable(schema, "5000 cells at 3% growth, doubling every hour")
    motion = {"type": "object", "required": ["initial_velocity", "height"], "properties": {
        "initial_velocity": {"type": "integer"}, "height": {"type": "integer"}}}
    assert fillable(motion, "final speed of a ball dropped from 100 m")
    assert fillable(motion, "final speed of a ball falling from rest through 100 m")
    assert not fillable(motion, "final speed of a ball thrown from 100 m")


def test_number_words_fill_a_numeric_array():
    """issue 13: "three bottles and two bags" carries the quantities of a required integer array."""
    schema = {"type": "object", "required": ["items", "quantity"], "properties": {
        "items": {"type": "array", "items": {"type": "string"}},
        "quantity": {"type": "array", "items": {"type": "integer"}}}}
    assert fillable(schema, "order three bottles of oil and two bags of rice")
    assert not fillable(schema, "order some oil and rice")


def test_an_argument_assigned_by_name_is_filled():
    """issue 13: ``x=data['sales']`` fills the numeric array ``x``; ``c = 0`` in an equation names nothing."""
    schema = {"type": "object", "required": ["x", "y"], "properties": {
        "x": {"type": "array", "items": {"type": "number"}}, "y": {"type": "array", "items": {"type": "number"}}}}
    assert fillable(schema, "fit a regression with x=data['sales'] and y=data['future']")
    assert not fillable(schema, "fit a regression of sales on future sales")
    scalars = {"type": "object", "required": ["b", "c"], "properties": {"b": {"type": "integer"},
                                                                        "c": {"type": "integer"}}}
    assert not fillable(scalars, "roots of bx + c = 0")


def test_a_four_letter_word_shares_a_stem_only_through_an_inflection():
    """issue 13: "laws" does not mention ``lawsuit``; "rates" and "rated" still mention ``rate``."""
    assert name_coverage("lawsuit_search", "find out about traffic laws in Texas") == 0.0
    assert name_coverage("rate_lookup", "current rates") == 1.0
    assert name_coverage("rate_lookup", "how it was rated") == 1.0
    assert name_coverage("quadratic_solver", "solve quadratics") == 1.0  # five-letter stems unchanged


def test_a_fitting_tool_wins_over_a_more_similar_one_that_does_not_fit():
    """issue 13: the best candidate by similarity + name falling short of the thresholds does not hide a
    runner-up that reaches ``router_sim_min`` on its own."""
    a = ToolSpec("history_get_monarchs", "Monarchs of a country.", {"type": "object", "properties": {}})
    b = ToolSpec("history_get_culture", "Culture of a country.", {"type": "object", "properties": {}})
    router = RuleRouter(None, Settings(router_sim_min=0.4, router_name_weight=0.2, router_name_cover_min=0.6))
    text = "monarchs, wars and art movements"
    assert router.best_fit(text, {"history_get_monarchs": 0.39, "history_get_culture": 0.43}, [a, b]) == \
        "history_get_culture"
    assert router.best_fit(text, {"history_get_monarchs": 0.39, "history_get_culture": 0.35}, [a, b]) is None


def test_a_documented_default_fills_a_required_argument():
    """issue 13 round 4: a required number whose schema or description states a default needs no value."""
    schema = {"type": "object", "required": ["size", "hand"], "properties": {
        "size": {"type": "integer", "description": "Cards in the deck. Default is 52."},
        "hand": {"type": "integer", "default": 5}}}
    assert fillable(schema, "odds of some hand in poker")
    bare = {"type": "object", "required": ["size", "hand"], "properties": {
        "size": {"type": "integer", "description": "Cards in the deck."}, "hand": {"type": "integer"}}}
    assert not fillable(bare, "odds of some hand in poker")


def test_counts_from_games_of_chance_are_common_knowledge():
    """issue 13 round 4: "a queen from a deck" states two numbers (4 of 52) without a digit."""
    schema = {"type": "object", "required": ["total", "favourable"], "properties": {
        "total": {"type": "integer"}, "favourable": {"type": "integer"}}}
    assert fillable(schema, "chance to pick a queen out of a shuffled deck")
    assert fillable(schema, "chance of a six when rolling a die")
    assert not fillable(schema, "chance that it rains on a picnic")


def test_asking_for_the_opposite_of_a_name_word_does_not_fit():
    """issue 13 round 4: "the lowest score" is not a request for ``high_score``; "highest" still is."""
    assert contradicts("tracker.high_score", "the lowest score in a chess app")
    assert not contradicts("tracker.high_score", "the highest score in a chess app")
    assert not contradicts("tracker.high_score", "high and low scores")  # the word itself is there too
    assert contradicts("calculate_internal_rate", "the external rate for these cash flows")
    assert not contradicts("stock_high_low", "the lowest price of AAPL this week")  # the name serves both
    assert not contradicts("getMinMaxTemperature", "the maximum temperature in Paris")
    assert not contradicts("weather_lookup", "the lowest temperature tomorrow")  # no opposite in the name
    spec = ToolSpec("tracker_high_score", "Highest score of a game.", {"type": "object", "properties": {}})
    router = RuleRouter(None, Settings(router_sim_min=0.4))
    assert router.best_fit("the lowest score of a game", {"tracker_high_score": 0.8}, [spec]) is None
    assert router.best_fit("the highest score of a game", {"tracker_high_score": 0.8}, [spec]) == "tracker_high_score"


def test_a_partly_named_tool_fits_when_the_request_is_close_to_its_whole_spec():
    """issue 13 round 4: one of three name words mentioned and a description cosine below the floor still
    fits when the request is close to the whole spec (name words, description, parameter descriptions)."""
    spec = ToolSpec("sports_fixture_list", "Upcoming fixtures of a team.", {
        "type": "object", "required": ["team"], "properties": {"team": {"type": "string",
                                                                        "description": "Team name."}}})
    assert spec_text(spec.name, spec.description, spec.parameters) == \
        "sports fixture: Upcoming fixtures of a team. team: Team name."
    router = RuleRouter(None, Settings(router_sim_min=0.4, router_sim_floor=0.3, router_name_cover_min=0.34,
                                       router_spec_sim_min=0.35))
    text = "who do the Bulls play next in their sports season"  # mentions "sports" only: cover 1/2
    assert name_coverage(spec.name, text) == pytest.approx(1 / 2)
    low = {spec.name: 0.25}
    assert router.best_fit(text, low, [spec], spec_scores={spec.name: 0.4}) == spec.name
    assert router.best_fit(text, low, [spec], spec_scores={spec.name: 0.3}) is None
    unnamed = "who do the Bulls play next"  # no name word: the spec cosine alone is not enough
    assert router.best_fit(unnamed, low, [spec], spec_scores={spec.name: 0.6}) is None


def test_a_conversion_or_a_currency_asked_without_the_word_mentions_the_name():
    """issue 13 round 4: "how many cups are in 3 pints" mentions ``..._convert``; "euros" mentions ``currency``."""
    assert name_coverage("kitchen.convert", "how many cups are in 3 pints of milk?") == pytest.approx(1 / 2)
    assert name_coverage("money_currency.convert", "how many yen do I get for 20 euros?") == pytest.approx(2 / 3)
    assert name_coverage("money_currency.convert", "a $20 dinner for two") == 0.0  # an amount names no currency
    assert name_coverage("kitchen.convert", "how many guests came to the party") == 0.0


def test_a_mostly_named_tool_fits_down_to_the_named_floor():
    """issue 13 round 4: two of three name words mentioned accept a cosine below ``router_sim_floor``."""
    spec = ToolSpec("money_currency_convert", "Exchange an amount.", {
        "type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}})
    router = RuleRouter(None, Settings(router_sim_floor=0.3, router_sim_floor_named=0.2, router_name_cover_most=0.6))
    text = "how many yen do I get for 20 euros?"
    assert router.best_fit(text, {spec.name: 0.25}, [spec], spec_scores={}) == spec.name
    assert router.best_fit(text, {spec.name: 0.15}, [spec], spec_scores={}) is None
    assert router.best_fit("how many yen is that", {spec.name: 0.25}, [spec], spec_scores={}) is None  # cover 1/3


def test_an_enum_is_filled_when_the_text_names_what_it_ranges_over():
    """issue 13 round 4: "Asian history" names a region "of Asia" (the caller picks the value); a word the
    tool name already carries, or a vague one, hints at nothing."""
    schema = {"type": "object", "required": ["area"], "properties": {"area": {
        "type": "string", "enum": ["North", "South"], "description": "The area of Asia you are interested in."}}}
    assert fillable(schema, "famous battles in Asian history", "history_fetch_battles")
    assert not fillable(schema, "famous battles in Asian history")  # without the tool name: values only
    assert not fillable(schema, "famous battles in history", "history_fetch_battles")
    assert not fillable(schema, "the battles of Asia", "asia_battles")  # the name already says Asia
    assert fillable(schema, "battles in the North", "asia_battles")


def test_a_named_historical_event_fixes_a_year():
    """issue 13 round 4: "during the Boer War" or "after the Treaty of Utrecht" gives a required year."""
    schema = {"type": "object", "required": ["event", "year"], "properties": {
        "event": {"type": "string"}, "year": {"type": "integer"}}}
    assert fillable(schema, "who led Britain during the Boer War?")
    assert fillable(schema, "who ruled Spain after the Treaty of Utrecht?")
    assert not fillable(schema, "who led Britain during the war?")  # no named event, no year


def test_a_ruler_a_year_and_the_past_mention_the_names_that_name_them():
    """issue 13 round 4: "the Queen of Spain in 1620" mentions ``monarch``/``leader``, ``year`` and
    ``historic``; a present-day year is not history and a queen bee rules nothing."""
    assert name_coverage("historic_leader_lookup", "who was the Queen of Spain in 1620?") == 1.0
    assert name_coverage("crown.getMonarchOfYear", "who was the Queen of Spain in 1620?") == pytest.approx(2 / 3)
    assert name_coverage("historic_leader_lookup", "who is the President of Chile in 2024?") == pytest.approx(1 / 2)
    assert name_coverage("historic_leader_lookup", "famous events of the 12th century") == pytest.approx(1 / 2)
    assert name_coverage("crown.getMonarchOfYear", "what does a bee colony do?") == 0.0
