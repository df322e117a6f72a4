"""Prompts of the evaluation harnesses: the answer judge (``bara eval ab --judge``) and the system prompt
the BFCL tool-selection benchmark puts in front of a model (``bara eval tools --bfcl``)."""

from __future__ import annotations

#: :func:`bara.eval.answers.judge_answer`: one JSON verdict per answer.
JUDGE_PROMPT = (
    "Rate the assistant's answer to the user's last question.\n"
    "faithfulness: 1-5, is every claim supported by the passages shown to the assistant?\n"
    "relevance: 1-5, does it address the question?\n"
    'Reply with JSON only: {{"faithfulness": n, "relevance": n}}.\n\n'
    "Question: {question}\n\nPassages the assistant saw:\n{passages}\n\nAnswer: {answer}")

#: :mod:`bara.eval.tools_bfcl`: the one instruction a model gets besides the BFCL question and functions.
BFCL_SYSTEM = ("Call a function only when one of the offered functions fits the user's request; "
               "otherwise answer in text without calling any function.")
