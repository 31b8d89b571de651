"""The budget dashboard: one page per analyst, its datasets' gauges, guarantees and ledgers.

The page is static; its script (served beside it, so the page's content
security policy can forbid inline scripts) asks the API with the analyst's
token for the datasets granted and each one's budget view: the same HTML as
a Session's notebook view (:func:`~privframe.api.html.session_html`: the
gauge, the guarantee, in ρ, (ε, δ) and μ for a zCDP grant and in ε (and δ)
for a pure-DP or (ε, δ) one, with what basic composition would have charged
an (ε, δ) grant, and the ledger). The token is typed
into the page or given in the address's fragment (``/dashboard#token=...``),
which browsers never send to a server, so it stays out of every access log;
the script then removes it from the address bar.

Example:
    >>> from privframe.api.server.dashboard import DASHBOARD_HTML
    >>> '<script src="/dashboard.js">' in DASHBOARD_HTML
    True
"""

from __future__ import annotations

__all__ = ["DASHBOARD_HTML", "DASHBOARD_JS"]

DASHBOARD_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>privframe: privacy budget</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 60em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.5em; }
#problem { color: #a00; }
</style>
</head>
<body>
<h1>privframe: your privacy budget</h1>
<form id="login" hidden>
<label>Access token <input id="token" type="password" autocomplete="off" size="60"></label>
<button type="submit">Show my budget</button>
</form>
<p id="problem" role="alert"></p>
<p id="who"></p>
<main id="datasets"></main>
<script src="/dashboard.js"></script>
</body>
</html>
"""
"""The page: a token form, and a section per dataset that the script fills."""

DASHBOARD_JS = """"use strict";
(function () {
  const problem = document.getElementById("problem");
  const main = document.getElementById("datasets");
  const form = document.getElementById("login");

  async function api(path, token, kind) {
    const answer = await fetch(path, { headers: { Authorization: "Bearer " + token } });
    if (!answer.ok) {
      let message = answer.status + " " + answer.statusText;
      try { message = (await answer.json()).error.message; } catch (e) { /* not JSON */ }
      throw new Error(message);
    }
    return kind === "html" ? answer.text() : answer.json();
  }

  async function show(token) {
    problem.textContent = "";
    main.replaceChildren();
    try {
      const granted = (await api("/v1/datasets", token, "json")).datasets;
      document.getElementById("who").textContent =
        granted.length + " dataset" + (granted.length === 1 ? "" : "s") + " granted to you";
      for (const name of granted) {
        const section = document.createElement("section");
        section.className = "dataset";
        section.dataset.name = name;
        const title = document.createElement("h2");
        title.textContent = name;
        const view = document.createElement("div");
        view.innerHTML = await api("/v1/datasets/" + encodeURIComponent(name) + "/view",
                                   token, "html");
        section.append(title, view);
        main.append(section);
      }
      document.body.dataset.state = "shown";
    } catch (error) {
      problem.textContent = error.message;
      form.hidden = false;
      document.body.dataset.state = "refused";
    }
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    show(document.getElementById("token").value.trim());
  });
  const given = new URLSearchParams(location.hash.slice(1)).get("token");
  if (given) {
    history.replaceState(null, "", location.pathname);
    show(given);
  } else {
    form.hidden = false;
  }
})();
"""
"""The page's script: reads the token, asks the API, and inserts each dataset's view."""
