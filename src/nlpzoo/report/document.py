"""One report, two renderings: a list of blocks written out as Markdown and as one HTML file.

Both renderings walk the same blocks, so `report.md` and `index.html` cannot drift apart. Inline
text may use `code`, **bold** and *italics*; the HTML embeds every figure as base64 so the page is
one file a reader can mail.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    frame: pd.DataFrame
    caption: str = ""


@dataclass
class Figure:
    path: Path  # the PNG on disk; Markdown links it relative to the report, HTML embeds it
    alt: str
    half: bool = False  # HTML: two side by side (per-run maps)


Block = Heading | Para | Bullets | Table | Figure


# --------------------------------------------------------------------------- Markdown


def _md_cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block], out_dir: Path) -> str:
    lines: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            lines += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Para):
            lines += [b.text, ""]
        elif isinstance(b, Bullets):
            lines += [f"- {item}" for item in b.items] + [""]
        elif isinstance(b, Table):
            cols = [_md_cell(c) for c in b.frame.columns]
            if b.caption:
                lines += [f"*{b.caption}*", ""]
            lines += ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
            lines += [
                "| " + " | ".join(_md_cell(v) for v in row) + " |"
                for row in b.frame.itertuples(index=False)
            ]
            lines.append("")
        elif isinstance(b, Figure):
            lines += [f"![{b.alt}]({Path(b.path).relative_to(out_dir).as_posix()})", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- HTML

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #ccc; padding-bottom: .2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .8em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: .3em; }
code { background: #f2f2f2; padding: 0 .2em; border-radius: 3px; }
figure { margin: 1em 0; }
figure.half { display: inline-block; width: 48%; margin-right: 1%; vertical-align: top; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .85em; color: #555; }
"""


def _inline(text: str) -> str:
    """Escape, then turn the Markdown subset used in the report into tags."""
    parts = re.split(r"(`[^`]+`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        s = html.escape(part)
        s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s)
        s = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", s)
        out.append(s)
    return "".join(out)


def to_html(blocks: list[Block], title: str) -> str:
    body: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            body.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            cap = f"<caption>{_inline(b.caption)}</caption>" if b.caption else ""
            head = "".join(f"<th>{_inline(str(c))}</th>" for c in b.frame.columns)
            rows = "".join(
                "<tr>" + "".join(f"<td>{_inline(str(v))}</td>" for v in row) + "</tr>"
                for row in b.frame.itertuples(index=False)
            )
            body.append(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(b, Figure):
            data = base64.b64encode(Path(b.path).read_bytes()).decode("ascii")
            alt = html.escape(b.alt, quote=True)
            cls = ' class="half"' if b.half else ""
            body.append(
                f'<figure{cls}><img src="data:image/png;base64,{data}" alt="{alt}">'
                f"<figcaption>{html.escape(b.alt)}</figcaption></figure>"
            )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
