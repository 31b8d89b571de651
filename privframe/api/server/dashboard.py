"""The budget dashboard: one page per analyst, a section per dataset granted, and a planner.

The page is static; its script (served beside it, so the page's content
security policy can forbid inline scripts) asks the API with the analyst's
token for the datasets granted and inserts each one's section, rendered
here on the server (:func:`dataset_html`) with every text escaped: what
remains in the grant's unit, the gauge, the budget spent over time, the
releases newest first with what each cost and bought, and the guarantee
(:func:`~privframe.api.html.dashboard_html`), then a form planning the next
query. The form posts an SQL text and a budget to
``/v1/datasets/NAME/plan``, which answers the budget planner's table and
chart (:func:`~privframe.plan_budget`) and spends nothing.

The token is typed into the page or given in the address's fragment
(``/dashboard#token=...``), which browsers never send to a server, so it
stays out of every access log; the script then removes it from the address
bar. A fragment may also carry ``sql=...`` (and ``rho=...`` or
``epsilon=...``, and ``dataset=...`` when several are granted): the page then
fills that dataset's planner and runs it, a link to a plan that can be
shared without its token.

Example:
    >>> from privframe.api.server.dashboard import DASHBOARD_HTML
    >>> '<script src="/dashboard.js">' in DASHBOARD_HTML
    True
"""

from __future__ import annotations

from privframe._html import number, text
from privframe.api.html import (
    PAGE_STYLE,
    BudgetUnit,
    SessionSnapshot,
    SessionView,
    dashboard_html,
)

__all__ = ["DASHBOARD_HTML", "DASHBOARD_JS", "dataset_html"]


def dataset_html(name: str, sess: SessionView) -> str:
    """A dataset's section of the dashboard: its name, its budget, the planner's form.

    The planner spends the grant's unit (``rho`` for a zCDP grant,
    ``epsilon`` otherwise) and offers a tenth of what remains (of the whole
    budget once none remains: a plan can be made, if not released).

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.server.dashboard import dataset_html
        >>> sess = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.PureDP(2.0))
        >>> page = dataset_html("<t>", sess)
        >>> "<h2>&lt;t&gt;</h2>" in page, 'name="epsilon" type="number"' in page
        (True, True)
        >>> 'value="0.2"' in page
        True
    """
    view = SessionSnapshot.of(sess)  # one read of the ledger for the section and the form
    unit = BudgetUnit.of(view.report())
    offered = (unit.remaining or unit.budget) / 10
    return (
        f'<section class="pf-dataset" data-name="{text(name)}"><h2>{text(name)}</h2>'
        + dashboard_html(view)
        + f'<form class="pf-planner" data-dataset="{text(name)}"><h3>Plan the next query</h3>'
        '<p class="pf-meta">Each output&#x27;s 95% interval at the budget you give: planning '
        "reads the public schema only and spends nothing.</p>"
        '<label>SQL <textarea name="sql" rows="3" required="required" spellcheck="false">'
        "</textarea></label>"
        f"<label>{unit.symbol} to spend "
        f'<input name="{unit.parameter}" type="number" min="0" step="any" required="required" '
        f'value="{text(number(offered))}"/></label> '
        '<button type="submit">Plan</button></form>'
        '<div class="pf-planned" aria-live="polite"></div></section>'
    )


_STYLE = """
body { margin: 0 auto; padding: 1em; }
h1 { font-size: 1.4em; }
h2 { font-size: 1.3em; margin: 0 0 0.3em; overflow-wrap: anywhere; }
h3 { font-size: 1.1em; margin-top: 1.5em; }
#problem, .pf-problem { color: #a00; }
#token { width: 100%; max-width: 36em; box-sizing: border-box; }
.pf-dataset { border-top: 2px solid #d1d5db; margin-top: 1.5em; padding-top: 1em; }
.pf-remaining { margin: 0.2em 0; }
.pf-big { font-size: 2.4em; }
.pf-table caption { max-width: calc(100vw - 2em); }
.pf-planner label { display: block; margin: 0.4em 0; }
.pf-planner textarea { display: block; width: 100%; box-sizing: border-box;
  font-family: ui-monospace, monospace; }
"""

DASHBOARD_HTML = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>privframe: privacy budget</title>
<style>{PAGE_STYLE}{_STYLE}</style>
</head>
<body>
<h1>privframe: your privacy budget</h1>
<form id="login" hidden>
<label>Access token <input id="token" type="password" autocomplete="off"></label>
<button type="submit">Show my budget</button>
</form>
<p id="problem" role="alert"></p>
<p id="who"></p>
<main id="datasets"></main>
<script src="/dashboard.js"></script>
</body>
</html>
"""
"""The page: the shared style sheet, a token form, and the datasets' sections the script inserts."""

DASHBOARD_JS = """"use strict";
(function () {
  const problem = document.getElementById("problem");
  const who = document.getElementById("who");
  const main = document.getElementById("datasets");
  const form = document.getElementById("login");
  let showing = 0;  // the newest show(): an older one that answers late stops

  async function api(path, token, kind, body) {
    const options = { headers: { Authorization: "Bearer " + token } };
    if (body !== undefined) {
      options.method = "POST";
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    const answer = await fetch(path, options);
    if (!answer.ok) {
      let message = answer.status + " " + answer.statusText;
      try { message = (await answer.json()).error.message; } catch (e) { /* not JSON */ }
      throw new Error(message);
    }
    return kind === "json" ? answer.json() : answer.text();
  }

  function route(name, what) {
    return "/v1/datasets/" + encodeURIComponent(name) + "/" + what;
  }

  function said(message) {
    const line = document.createElement("p");
    line.className = "pf-problem";
    line.textContent = message;
    return line;
  }

  function planner(section, token) {
    const planning = section.querySelector("form.pf-planner");
    const out = section.querySelector(".pf-planned");
    if (!planning || !out) { return; }
    const button = planning.querySelector("button");
    let asked = 0;  // the newest request: an older answer that arrives late is dropped
    planning.addEventListener("submit", async function (event) {
      event.preventDefault();
      const mine = ++asked;
      const amount = planning.querySelector("input[type=number]");
      const body = { sql: planning.querySelector("textarea").value };
      body[amount.name] = Number(amount.value);
      out.dataset.state = "planning";
      button.disabled = true;
      try {
        const answer = await api(route(planning.dataset.dataset, "plan"), token, "json", body);
        if (mine !== asked) { return; }
        out.innerHTML = answer.html;  // the server escaped every text in it
        out.dataset.state = "planned";
      } catch (error) {
        if (mine !== asked) { return; }
        out.replaceChildren(said(error.message));
        out.dataset.state = "refused";
      } finally {
        if (mine === asked) { button.disabled = false; }
      }
    });
  }

  function plan(asked) {
    const forms = Array.from(main.querySelectorAll("form.pf-planner"));
    const named = asked.get("dataset");
    const chosen = named === null ? forms[0] : forms.find((f) => f.dataset.dataset === named);
    if (!chosen) {
      problem.textContent = named === null ? "" :
        "this link plans on the dataset " + named + ", which is not granted to you";
      return;
    }
    chosen.querySelector("textarea").value = asked.get("sql");
    const amount = chosen.querySelector("input[type=number]");
    const other = amount.name === "rho" ? "epsilon" : "rho";
    if (asked.get(amount.name)) {
      amount.value = asked.get(amount.name);
    } else if (asked.get(other)) {
      problem.textContent = "this link gives " + other + ", and your grant spends " +
        amount.name + ": the plan uses the amount shown";
    }
    chosen.requestSubmit();
  }

  async function show(token, asked) {
    const mine = ++showing;
    problem.textContent = "";
    who.textContent = "";
    main.replaceChildren();
    let granted;
    try {
      granted = (await api("/v1/datasets", token, "json")).datasets;
    } catch (error) {
      if (mine !== showing) { return; }
      problem.textContent = error.message;
      form.hidden = false;
      document.body.dataset.state = "refused";
      return;
    }
    if (mine !== showing) { return; }
    form.hidden = true;
    who.textContent =
      granted.length + " dataset" + (granted.length === 1 ? "" : "s") + " granted to you";
    for (const name of granted) {
      let section;
      try {
        const holder = document.createElement("div");
        holder.innerHTML = await api(route(name, "dashboard"), token, "text");
        section = holder.firstElementChild;
      } catch (error) {
        // One dataset that cannot be shown leaves the others: its section says why.
        section = document.createElement("section");
        section.className = "pf-dataset";
        section.dataset.name = name;
        const title = document.createElement("h2");
        title.textContent = name;
        section.append(title, said(error.message));
      }
      if (mine !== showing) { return; }
      main.append(section);
      planner(section, token);
    }
    document.body.dataset.state = "shown";
    if (asked.get("sql")) { plan(asked); }
  }

  const asked = new URLSearchParams(location.hash.slice(1));
  const given = asked.get("token");
  asked.delete("token");
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    show(document.getElementById("token").value.trim(), asked);
  });
  if (given) {
    // The token leaves the address bar; a plan's parameters stay, a link to share.
    const shared = asked.toString();
    history.replaceState(null, "", location.pathname + (shared ? "#" + shared : ""));
    show(given, asked);
  } else {
    form.hidden = false;
  }
})();
"""
"""The page's script: reads the token, inserts each dataset's section, runs the planner."""
