"""Text toolkit: one home for what the services, trainers and benches do to text.

- `sentences`: the sentence splitter (`sentence_spans`, with offsets) and the plainer
  punctuation rules some trained models were measured with;
- `words`: tokenising words for overlap (`content_words`, `support`, `words`);
- `qa_metrics`: answer scoring by SQuAD rules (`token_f1`, `exact`, `contained`);
- `citations`: the `[n]` markers: writing one (`with_citation`), reading and removing them
  (`cited`, `without_citations`).
"""

from shared.text.citations import with_citation, without_citations
from shared.text.qa_metrics import best, contained, exact, normalize, squad_tokens, token_f1
from shared.text.sentences import (
    STOP_BREAK,
    STOP_ONLY,
    Span,
    claim_spans,
    sentence_around,
    sentence_spans,
    span_around,
    stop_pieces,
    windows,
)
from shared.text.words import (
    OVERLAP_STOPWORDS,
    STOPWORDS,
    WORD,
    content_words,
    overlap_words,
    support,
    words,
)

__all__ = [
    "OVERLAP_STOPWORDS",
    "STOPWORDS",
    "STOP_BREAK",
    "STOP_ONLY",
    "WORD",
    "Span",
    "best",
    "claim_spans",
    "contained",
    "content_words",
    "exact",
    "normalize",
    "overlap_words",
    "sentence_around",
    "sentence_spans",
    "span_around",
    "squad_tokens",
    "stop_pieces",
    "support",
    "token_f1",
    "windows",
    "with_citation",
    "without_citations",
    "words",
]
