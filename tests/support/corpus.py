"""The invalid-recipe corpus: each file states what the loader must say about it.

Header lines of each file in tests/fixtures/recipes/invalid/:
    # expect: <fragment>     (one or more) text the error output must contain
    # line: <N>              the line the first problem must be reported at
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "recipes" / "invalid"
VALID = Path(__file__).resolve().parent.parent / "fixtures" / "recipes" / "valid"


@dataclass(frozen=True)
class CorpusCase:
    path: Path
    expect: tuple[str, ...]
    line: int

    @property
    def id(self) -> str:
        return self.path.stem


def corpus_cases() -> list[CorpusCase]:
    cases = []
    for path in sorted(CORPUS.glob("*.yaml")):
        expect, line = [], None
        for text in path.read_text().splitlines():
            if text.startswith("# expect:"):
                expect.append(text.split(":", 1)[1].strip())
            elif text.startswith("# line:"):
                line = int(text.split(":", 1)[1])
        assert expect and line, f"{path} lacks '# expect:' or '# line:' headers"
        cases.append(CorpusCase(path, tuple(expect), line))
    return cases
