"""How a table's columns share a narrow terminal (issue 28 §5: tables broke paths mid-word)."""

from __future__ import annotations

from flagtree_cpu_build.table_layout import ELLIPSIS, LABEL, PATH, PROSE, Column, cell_lines, column_widths

LOG = "/tmp/pytest-of-root/pytest-12/test_x0/a-long-folder/ws/logs/build-20240101-120000.log"


def shown(text: str, kind, width: int) -> list[str]:
    return [ELLIPSIS.join(text[start:end] for start, end in line) for line in cell_lines(text, kind, width)]


def test_a_path_that_fits_is_left_whole() -> None:
    assert shown(LOG, PATH, len(LOG)) == [LOG]


def test_a_path_too_long_keeps_its_start_and_file_name() -> None:
    for width in (20, 30, 45, 60, len(LOG) - 1):
        [line] = shown(LOG, PATH, width)
        head, mark, tail = line.partition(ELLIPSIS)
        assert mark and len(line) <= width, line
        assert LOG.startswith(head) and LOG.endswith(tail) and head.startswith("/tmp"), line
        assert tail.endswith("/build-20240101-120000.log") or width < len("/tmp/…/build-20240101-120000.log"), line
    assert shown(LOG, PATH, 40) == ["/tmp/…/ws/logs/build-20240101-120000.log"]


def test_prose_wraps_at_spaces_and_keeps_a_path_on_a_line_of_its_own() -> None:
    text = f"all 12 in place in {LOG} since yesterday"
    assert shown(text, PROSE, len(LOG)) == ["all 12 in place in", LOG, "since yesterday"]
    assert shown(text, PROSE, 35) == ["all 12 in place in", "/tmp/…/build-20240101-120000.log", "since yesterday"]


def test_a_path_column_is_not_wrapped_at_its_spaces() -> None:
    command = "flagtree-cpu -w /tmp/a/b/c/workspace status"
    assert shown(command, PATH, 30) == [shown(command, PATH, 30)[0]]
    assert len(shown(command, PATH, 30)[0]) <= 30


def test_prose_gives_its_width_before_a_path_is_elided() -> None:
    columns = [Column("stage", LABEL), Column("item", PATH), Column("detail")]
    rows = [["links", LOG, "every one of the twelve links is in place and current"]]
    widths = column_widths(columns, rows, len("links") + len(LOG) + len("current") + 2)
    assert widths[0] == len("links") and widths[1] == len(LOG), widths  # the path whole, the prose at a word


def test_when_nothing_else_gives_the_widest_path_is_elided_and_labels_stay() -> None:
    columns = [Column("status", LABEL), Column("path", PATH), Column("why")]
    rows = [["would remove", LOG, "older than the ten newest"]]
    widths = column_widths(columns, rows, 60)
    assert widths[0] == len("would remove") and sum(widths) == 60, widths
    assert widths[1] < len(LOG), widths


def test_a_row_that_fits_is_not_touched() -> None:
    columns = [Column("a", LABEL), Column("b", PATH), Column("c")]
    rows = [["x", LOG, "short"]]
    assert column_widths(columns, rows, 500) == [1, len(LOG), 5]
