"""Prompt text of the optional LoCoMo answer-and-judge run (`bara eval memory --judge`)."""

ANSWER_SYSTEM = ("You answer questions about a long conversation between {a} and {b} using only the excerpts "
                 "below. Answer in a few words; if the excerpts do not say, answer \"unknown\".\n\nExcerpts:\n{items}")
JUDGE_SYSTEM = ("You grade an answer against a reference answer. Reply with exactly one word: CORRECT if the "
                "answer means the same as the reference (same fact, date or list, wording may differ), "
                "otherwise WRONG.")
JUDGE_USER = "Question: {question}\nReference answer: {reference}\nAnswer: {answer}"
NO_MODEL = "no model configured: pass --judge provider:name (e.g. openai:gpt-4o-mini) to generate and judge answers"
