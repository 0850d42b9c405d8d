"""The HTML report: one self-contained page rendered from ``templates/report.html.j2``.

jinja2 is a core dependency (``superopt report --format html`` is part of the toolbox every
install has, and jinja2 is small and pure Python); an environment without it still gets a
one-line message that says how to install it, never a traceback.
"""
from __future__ import annotations

from reports.chart import Box, Svg, box_plot
from reports.report import Report, headline_items
from reports.view import TimingView, us


# difflib.HtmlDiff's class names, so that styles and tools written for those apply.
ROW_CLASS = {"equal": "diff_eq", "replace": "diff_chg", "delete": "diff_sub", "insert": "diff_add", "fold": "fold"}


class HtmlUnavailable(RuntimeError):
    """No HTML can be made: jinja2 cannot be imported (the message says how to install it) or
    the template failed (the message names the template line; Markdown still works)."""


def _boxplot(t: TimingView) -> Svg:
    return box_plot([Box("nvcc", t.baseline), Box("nvcc-plus", t.candidate)])


def render_html(report: Report) -> str:
    try:
        import jinja2
    except ImportError as exc:
        raise HtmlUnavailable(f"the HTML report needs jinja2, which is not importable here ({exc}); "
                              "install it with: python3 -m pip install 'jinja2>=3.1'") from None
    env = jinja2.Environment(loader=jinja2.PackageLoader("reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=False, lstrip_blocks=False)
    env.filters["us"] = us
    env.globals["boxplot"] = _boxplot
    env.globals["row_class"] = ROW_CLASS
    env.globals["headline_items"] = headline_items
    try:
        return env.get_template("report.html.j2").render(report=report)
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise HtmlUnavailable(f"reports/templates/report.html.j2{f':{line}' if line else ''}: {exc} "
                              "(a bug in nvcc-plus's report template; --format md renders the same records)") from exc
