"""The funds domain's own settings section: the offline rule router's thresholds (``bara/domains/funds/router/``).

:class:`FundsSettings` is the section's model, registered through the domain plug-in
(``FundsDomain.settings_model``); ``Settings.section("funds", FundsSettings)`` (:func:`funds_settings`)
reads it from a :class:`~bara.settings.Settings`. The fields keep their ``router_`` names, so the flat
spellings load into the section as before: ``BARA_ROUTER_SIM_MIN=0.45`` in the environment,
``router_sim_min = 0.45`` in ``bara.toml``, ``Settings(router_sim_min=0.45)``; or, as a section,
``[domains.funds]`` (``[bara.domains.funds]``) with ``router_sim_min = 0.45`` under it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from bara.settings import Settings


class FundsSettings(BaseModel):
    """The rule router's thresholds; each field says why it has its default."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    router_scheme_min_score: float = Field(default=85.0, ge=0.0, le=100.0, description="rapidfuzz ratio a message "
                                           "window needs against a scheme's short name: one typo or a missing "
                                           "'fund' passes, a different scheme of the same house does not.")
    router_scheme_token_score: float = Field(default=85.0, ge=0.0, le=100.0, description="Per-word ratio for a held "
                                             "scheme named without its fund house ('my flexi cap'): one typo in "
                                             "a 7+ letter word.")
    router_keyword_score: float = Field(default=85.0, ge=0.0, le=100.0, description="Per-word ratio at which a "
                                        "misspelt keyword is read as the keyword ('transcations').")
    router_sim_min: float = Field(default=0.4, ge=-1.0, le=1.0, description="With no rule firing, the best "
                                  "cosine(message, tool's 'use for' text) that calls the tool on its own; "
                                  "below, no tool fits (tuned on the BFCL dev half: 0.25 called a tool for "
                                  "most near-miss requests).")
    router_sim_floor: float = Field(default=0.3, ge=-1.0, le=1.0, description="Lowest cosine at which a tool whose "
                                    "name the message mentions (router_name_cover_min) is still called.")
    router_name_cover_min: float = Field(default=0.34, ge=0.0, le=1.0, description="Share of a tool name's content "
                                         "words the message must mention to accept a cosine in [floor, min): "
                                         "one of its (up to three) task words.")
    router_name_cover_most: float = Field(default=0.6, ge=0.0, le=1.0, description="Share of a tool name's content "
                                          "words (two of three) that is strong evidence on its own: the tool is "
                                          "called down to router_sim_floor_named.")
    router_sim_floor_named: float = Field(default=0.2, ge=-1.0, le=1.0, description="Lowest cosine at which a tool "
                                          "whose name the message mostly mentions (router_name_cover_most) is "
                                          "called: paraphrases such as 'how many ounces in 2 pounds' for a "
                                          "conversion tool sit at 0.25-0.30 (simple_python +2, no "
                                          "irrelevance dev case changed).")
    router_spec_sim_min: float = Field(default=0.35, ge=-1.0, le=1.0, description="cosine(message, the tool's "
                                       "whole spec: name words, description, parameter descriptions) at which a "
                                       "tool whose name the message partly mentions fits below router_sim_floor "
                                       "or router_name_cover_min (a 1-of-3 name cover): on simple_python +5 right, "
                                       "irrelevance dev -1; 0.30 cost one more irrelevance case, 0.40 one fewer "
                                       "right.")
    router_name_weight: float = Field(default=0.2, ge=0.0, le=1.0, description="Weight of the name coverage when "
                                      "ranking tools by cosine: breaks near ties towards the tool named for "
                                      "the task ('search_book' over 'reserve_book').")
    router_sim_weight: float = Field(default=1.0, ge=0.0, le=4.0, description="Weight of cosine(message, tool's 'use "
                                     "for' text) added to a tool's rule score: a perfect match counts as one "
                                     "keyword rule (weight 1.0).")
    router_thin_min_hits: int = Field(default=2, ge=0, description="A document search with fewer hits is thin and is "
                                      "reformulated once: one passage rarely answers a question.")
    router_thin_rank: float = Field(default=40.0, gt=0.0, description="A search is also thin when its best fused score "
                                    "is below that of a hit both arms rank here: router_thin_score = (weight_lexical "
                                    "+ weight_dense) / (rrf_k + 40) = 0.02 at the defaults, above the 1/(rrf_k + 1) "
                                    "~ 0.0164 a hit only one arm found can reach.")


def funds_settings(settings: Settings) -> FundsSettings:
    """The funds section of ``settings`` (validated once per Settings object)."""
    return settings.section("funds", FundsSettings)


def thin_score(settings: Settings) -> float:
    """Best fused (RRF) score below which a search is thin; derived from rrf_k and the arm weights so it
    follows them (0.02 at rrf_k=60, weights 1 and 1)."""
    return (settings.weight_lexical + settings.weight_dense) / (settings.rrf_k + funds_settings(settings).router_thin_rank)
