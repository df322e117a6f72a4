"""Optional judged answers for `bara eval memory --judge provider:name`.

The model answers each answerable question from the items a mode put into the prompt,
then the same model grades the answer against LoCoMo's reference (CORRECT / WRONG), the
LLM-as-judge protocol of the Mem0 paper (Chhikara et al. 2025, "J" score). A judged
score depends on the model; bara's own figures are retrieval recall, not this.
"""

from __future__ import annotations

from typing import Any, Sequence

from bara.eval.locomo import QuestionRow
from bara.eval.locomo_data import ADVERSARIAL
from bara.llm.errors import LLMError
from bara.messages import SystemMessage, UserMessage
from bara.prompts import locomo as P


def judge_rows(model: Any, rows: Sequence[QuestionRow], speakers: dict[str, tuple[str, str]],
               references: dict[tuple[str, str], str]) -> dict[str, Any]:
    """Accuracy of judged answers over the answerable questions of one mode; failures are counted."""
    correct = failed = n = 0
    for row in rows:
        if row.category == ADVERSARIAL:
            continue
        n += 1
        a, b = speakers.get(row.conversation, ("A", "B"))
        try:
            verdict = _judge_one(model, row, a, b, references.get((row.conversation, row.question), ""))
        except LLMError:
            failed += 1
            continue
        correct += verdict
    return {"accuracy": round(correct / (n - failed), 4) if n > failed else None, "n": n, "failed": failed}


def _judge_one(model: Any, row: QuestionRow, a: str, b: str, reference: str) -> bool:
    items = "\n".join(f"- {t}" for t in row.texts) or "(none)"
    answer = model.complete([SystemMessage(P.ANSWER_SYSTEM.format(a=a, b=b, items=items)),
                             UserMessage(row.question)]).message.text
    verdict = model.complete([SystemMessage(P.JUDGE_SYSTEM),
                              UserMessage(P.JUDGE_USER.format(question=row.question, reference=reference,
                                                              answer=answer))]).message.text
    return verdict.strip().upper().startswith("CORRECT")
