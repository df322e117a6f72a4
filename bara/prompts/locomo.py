"""Prompt text of the optional LoCoMo answer-and-judge run (`bara eval memory --judge`)."""

ANSWER_SYSTEM = ("You answer questions about a long conversation between {a} and {b} using only the excerpts "
                 "below. Answer in a few words; if the excerpts do not say, answer \"unknown\".\n\nExcerpts:\n{items}")
JUDGE_SYSTEM = ("You grade an answer against a reference answer. Reply with exactly one word: CORRECT if the "
                "answer means the same as the reference (same fact, date or list, wording may differ), "
                "otherwise WRONG.")
JUDGE_USER = "Question: {question}\nReference answer: {reference}\nAnswer: {answer}"
NO_MODEL = "no model configured: pass --judge provider:name (e.g. openai:gpt-4o-mini) to generate and judge answers"

# Malformed LoCoMo files (bara.eval.locomo_data): each names the file (and list item) and what to change.
NOT_A_CONVERSATION = "{path}{where} is not a LoCoMo conversation (needs speaker_a, speaker_b, session_N and qa)"
MISSING_SPEAKERS = "{path}{where} has no {keys}: name both speakers of the conversation (speaker_a, speaker_b)"
NO_QUESTIONS = ("{path}{where} has no questions (its qa list is empty): add qa items "
                "{{question, answer, evidence, category}}, or leave the file out")
DUPLICATE_DIA_IDS = ("{path}{where} has {n} dia_id(s) shared by several turns ({ids}): give every turn its own "
                     "dia_id, or evidence cannot say which turn it means")
