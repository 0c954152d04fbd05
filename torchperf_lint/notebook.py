"""Jupyter notebooks: the code cells are analysed as one module (a loop in one cell calls a model
defined in another) and findings are reported per cell.

IPython syntax is masked before parsing: `%magic`, `!shell`, `x = !cmd`, help lines (`?obj`,
`obj??`, `obj.method?`), and the lines a magic or shell line continues onto with a trailing
backslash, become `pass` statements carrying a marker, and come back unchanged after a fix. A cell
magic whose body is Python (`%%time`, `%%timeit`, `%%capture`, `%%prun`) masks its own line only,
so its body is linted at the cell's own lines; any other (`%%bash`, `%%html`, `%%writefile`) masks
the whole cell.
Cells are joined with boundary comments, so fixed code splits back into the same cells.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Callable, Optional

BOUNDARY = "# torchperf-lint: cell boundary"
_MAGIC_MARK = "# torchperf-lint: masked "
_MAGIC = re.compile(r"^(\s*)(%|!|\?|[\w.]+\s*=\s*[!%]|.*\?\s*$)")
# cell magics that run their body as Python in the kernel: the body is linted
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})


class NotebookError(Exception):
    """The file is not a notebook this tool can read."""


@dataclasses.dataclass
class Cell:
    index: int  # position in the notebook's cell list
    number: int  # 1-based position among all cells, as the notebook shows them
    lines: list[str]  # source lines without newlines, magics masked
    masked: dict[str, str]  # marker -> original line


@dataclasses.dataclass
class Notebook:
    data: dict[str, Any]
    cells: list[Cell]
    raw_text: str

    def module_source(self) -> str:
        """All code cells as one module; cell k starts after the k-th boundary line."""
        parts: list[str] = []
        for cell in self.cells:
            parts.append(BOUNDARY)
            parts.extend(cell.lines)
        return "\n".join(parts) + "\n"

    def locate(self, line: int) -> tuple[Optional[int], int]:
        """(cell number, line within the cell) for a line of `module_source()`."""
        current = 0
        for cell in self.cells:
            current += 1  # the boundary line
            if line <= current + len(cell.lines):
                return cell.number, max(1, line - current)
            current += len(cell.lines)
        return None, line

    def module_line(self, cell_number: Optional[int], line: int) -> int:
        """The line of `module_source()` for a line of a cell: the inverse of `locate`."""
        current = 0
        for cell in self.cells:
            current += 1  # the boundary line
            if cell.number == cell_number:
                return current + line
            current += len(cell.lines)
        return line

    def relabel(self, context: Optional[str]) -> Optional[str]:
        """Hot-path reasons name lines of the joined module; say cell and line instead."""
        if context is None:
            return None

        def cell_line(match: re.Match[str]) -> str:
            cell, line = self.locate(int(match.group(1)))
            return f"at cell {cell}, line {line}" if cell is not None else match.group(0)

        return re.sub(r"at line (\d+)", cell_line, context)


def _source_lines(cell: dict[str, Any]) -> list[str]:
    source = cell.get("source", "")
    text = "".join(source) if isinstance(source, list) else str(source)
    return text.split("\n") if text else []


def _mask(lines: list[str], counter: list[int]) -> tuple[list[str], dict[str, str]]:
    masked: dict[str, str] = {}
    out: list[str] = []
    whole_cell = bool(lines) and _cell_magic(lines[0]) not in (None, *PYTHON_CELL_MAGICS)
    continued: Optional[str] = None  # the indent of a masked line that ends with a backslash
    for line in lines:
        match = _MAGIC.match(line)
        if whole_cell or continued is not None or (match and not line.lstrip().startswith("#")):
            counter[0] += 1
            marker = f"{_MAGIC_MARK}{counter[0]}"
            if continued is not None:
                indent = continued  # IPython joins the line to the magic it continues
            else:
                indent = "" if whole_cell else (match.group(1) if match else "")
            masked[marker] = line
            out.append(f"{indent}pass  {marker}")
            continued = indent if not whole_cell and line.rstrip("\r").endswith("\\") else None
        else:
            out.append(line)
    return out, masked


def _cell_magic(line: str) -> Optional[str]:
    """The name of the cell magic a cell's first line starts (`%%timeit -n 10` is timeit), or None."""
    match = re.match(r"\s*%%(\w*)", line)
    return match.group(1) if match else None


def read_notebook(text: str) -> Notebook:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise NotebookError(f"not valid notebook JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError("not a notebook: no cell list")
    cells: list[Cell] = []
    counter = [0]
    for index, cell in enumerate(data["cells"]):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            lines, masked = _mask(_source_lines(cell), counter)
            cells.append(Cell(index, index + 1, lines, masked))
    return Notebook(data, cells, text)


def write_back(notebook: Notebook, fixed_source: str) -> str:
    """The notebook's JSON with each code cell's source replaced by its fixed text, keeping
    outputs, metadata, the notebook's indentation and its trailing newline."""
    chunks = fixed_source.split(BOUNDARY + "\n")
    leading, cell_texts = chunks[0], chunks[1:]
    if len(cell_texts) != len(notebook.cells):
        raise NotebookError("a fix moved a cell boundary; notebook not written")
    data = notebook.data
    for position, (cell, text) in enumerate(zip(notebook.cells, cell_texts, strict=False)):
        if position == 0 and leading:
            text = leading + text  # an import a fix put at the top of the module
        if text.endswith("\n"):
            text = text[:-1]  # the joiner's newline, not the cell's
        for marker, original in cell.masked.items():
            text = re.sub(rf"^[ \t]*pass  {re.escape(marker)}$", _literal(original), text, flags=re.M)
        original_source = data["cells"][cell.index].get("source", "")
        lines = text.split("\n")
        if isinstance(original_source, list):
            data["cells"][cell.index]["source"] = [line + "\n" for line in lines[:-1]] + (
                [lines[-1]] if lines[-1] else []
            )
        else:
            data["cells"][cell.index]["source"] = text
    indent = _indent_of(notebook.raw_text)
    out = json.dumps(data, indent=indent, ensure_ascii=False)
    return out + ("\n" if notebook.raw_text.endswith("\n") else "")


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A re.sub replacement that inserts `text` as it is (no backslash processing)."""
    return lambda _match: text


def _indent_of(text: str) -> Optional[int]:
    match = re.search(r"^\{\s*\n( +)\"", text)
    return len(match.group(1)) if match else 1
