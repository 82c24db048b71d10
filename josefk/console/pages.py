"""The console's HTML pages: one server-rendered frame per path, filled by console.js.

Owns the paths a person links to (``/``, ``/topics``, ``/topics/<name>``,
``/topics/<name>/messages``, ``/groups``, ``/groups/<id>``, ``/brokers/<id>``, ``/acls``,
``/users``) and the frame of each: navigation, headings, the forms of its actions and the
empty tables and charts that the page's script fills from ``/api/``. Names from the URL are
escaped here and handed to the script in ``data-`` attributes, never pasted into script.

Imports nothing of josefk.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from aiohttp import web

_NAV = (
    ("/", "overview", "Overview"),
    ("/topics", "topics", "Topics"),
    ("/groups", "groups", "Consumer groups"),
    ("/acls", "acls", "ACLs"),
    ("/users", "users", "Users"),
)


def _frame(
    title: str,
    page: str,
    body: str,
    *,
    section: str,
    data: dict[str, str] | None = None,
) -> web.Response:
    attrs = "".join(f' data-{k}="{escape(v)}"' for k, v in (data or {}).items())
    nav = "".join(
        f'<a href="{href}" class="active">{label}</a>'
        if key == section
        else f'<a href="{href}">{label}</a>'
        for href, key, label in _NAV
    )
    html = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · josefk console</title>
<link rel="stylesheet" href="/static/console.css">
<link rel="icon" href="data:,">
</head>
<body data-page="{page}"{attrs}>
<header class="top"><a class="brand" href="/">josefk <span>console</span></a><nav>{nav}</nav>
<span id="cluster-id" class="muted"></span></header>
<main>
<div id="flash" class="flash" hidden></div>
{body}
</main>
<div id="dialog" class="dialog" hidden><div class="dialog-box" role="dialog" aria-modal="true">
<h3 id="dialog-title"></h3><div id="dialog-body"></div>
<div class="dialog-actions"><button id="dialog-cancel" type="button">Cancel</button>
<button id="dialog-confirm" type="button" class="danger">Confirm</button></div></div></div>
<script src="/static/console.js"></script>
</body>
</html>
"""
    return web.Response(text=html, content_type="text/html")


def _chart(chart_id: str, title: str) -> str:
    return (
        f'<figure class="chart"><figcaption>{title}</figcaption>'
        f'<svg id="{chart_id}" class="chart-svg" viewBox="0 0 600 180" '
        'role="img"></svg>'
        f'<div class="legend" id="{chart_id}-legend"></div></figure>'
    )


async def overview(request: web.Request) -> web.Response:
    body = f"""
<h1>Cluster</h1>
<section class="cards" id="cards"></section>
<section class="charts">{_chart("chart-records", "Records per second")}{_chart("chart-bytes", "Bytes per second")}</section>
<section class="split">
<div><h2>Brokers</h2><table id="brokers" class="grid"></table></div>
<div><h2>Groups by state</h2><table id="group-states" class="grid"></table></div>
</section>
<section id="urp-section" hidden><h2>Under-replicated and offline partitions</h2>
<table id="urp" class="grid"></table></section>
"""
    return _frame("Overview", "overview", body, section="overview")


async def topics(request: web.Request) -> web.Response:
    body = """
<h1>Topics</h1>
<div class="toolbar"><input id="topic-filter" type="search" placeholder="Filter topics">
<label><input id="show-internal" type="checkbox"> internal topics</label>
<span class="spacer"></span>
<details class="action"><summary>Create topic</summary>
<form id="create-topic" class="form-row">
<label>Name <input name="name" required></label>
<label>Partitions <input name="partitions" type="number" min="1" value="1"></label>
<label>Replication factor <input name="replication_factor" type="number" min="-1" value="-1"></label>
<label>Configs <input name="configs" placeholder="retention.ms=86400000, cleanup.policy=compact"></label>
<button type="submit">Create…</button></form></details></div>
<div class="pager"><span id="topic-count" class="muted"></span>
<button id="topics-prev" type="button" class="secondary">Previous</button>
<button id="topics-next" type="button" class="secondary">Next</button></div>
<table id="topics" class="grid"></table>
"""
    return _frame("Topics", "topics", body, section="topics")


async def topic(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    link = quote(name, safe="")
    body = f"""
<h1>Topic <span class="name">{escape(name)}</span></h1>
<p class="tabs"><a class="active" href="/topics/{link}">Partitions and configs</a>
<a href="/topics/{link}/messages">Messages</a></p>
<section class="cards" id="cards"></section>
<section class="charts">{_chart("chart-produce", "Produce rate (records per second)")}</section>
<h2>Partitions</h2>
<table id="partitions" class="grid"></table>
<h2>Actions</h2>
<div class="actions">
<details class="action"><summary>Produce a record</summary>
<form id="produce" class="form-col">
<label>Partition <input name="partition" type="number" min="0" placeholder="by key"></label>
<label>Key <input name="key"></label>
<label>Value <textarea name="value" rows="3"></textarea></label>
<label>Headers <input name="headers" placeholder="source=console, trace=abc"></label>
<button type="submit">Produce…</button></form></details>
<details class="action"><summary>Add partitions</summary>
<form id="add-partitions" class="form-col">
<label>New partition count <input name="count" type="number" min="1" required></label>
<button type="submit">Add partitions…</button></form></details>
<details class="action"><summary>Delete records</summary>
<form id="delete-records" class="form-col">
<label>Partition <input name="partition" type="number" min="0" value="0" required></label>
<label>Up to offset (exclusive; -1 for all) <input name="offset" type="number" min="-1" required></label>
<button type="submit" class="danger">Delete records…</button></form></details>
<details class="action"><summary>Delete topic</summary>
<form id="delete-topic" class="form-col"><p>Deletes the topic and all its records.</p>
<button type="submit" class="danger">Delete topic…</button></form></details>
</div>
<h2>Configs</h2>
<form id="alter-config" class="form-row">
<label>Config <input name="name" required placeholder="retention.ms"></label>
<label>Value <input name="value" placeholder="empty: back to the default"></label>
<button type="submit">Set…</button></form>
<table id="configs" class="grid"></table>
"""
    return _frame(f"Topic {name}", "topic", body, section="topics", data={"topic": name})


async def messages(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    link = quote(name, safe="")
    body = f"""
<h1>Topic <span class="name">{escape(name)}</span></h1>
<p class="tabs"><a href="/topics/{link}">Partitions and configs</a>
<a class="active" href="/topics/{link}/messages">Messages</a></p>
<form id="browse" class="form-row toolbar">
<label>Partition <select name="partition"><option value="all">all</option></select></label>
<label>From <select name="from"><option value="newest">newest</option>
<option value="offset">offset</option><option value="time">time</option></select></label>
<label class="from-offset" hidden>Offset <input name="offset" type="number" min="0" value="0"></label>
<label class="from-time" hidden>Time <input name="time" type="datetime-local" step="1"></label>
<label>Limit <input name="limit" type="number" min="1" max="500" value="50"></label>
<label>Key contains <input name="key" type="search"></label>
<label>Content contains <input name="q" type="search"></label>
<label>Show as <select name="format"><option value="text">text</option>
<option value="json">pretty JSON</option><option value="hex">hex</option></select></label>
<button type="submit">Read</button></form>
<p id="browse-summary" class="muted"></p>
<div id="records"></div>
"""
    return _frame(f"Messages of {name}", "messages", body, section="topics", data={"topic": name})


async def groups(request: web.Request) -> web.Response:
    body = """
<h1>Consumer groups</h1>
<div class="toolbar"><input id="group-filter" type="search" placeholder="Filter groups"></div>
<p id="group-count" class="muted"></p>
<table id="groups" class="grid"></table>
"""
    return _frame("Consumer groups", "groups", body, section="groups")


async def group(request: web.Request) -> web.Response:
    group_id = request.match_info["group"]
    body = f"""
<h1>Group <span class="name">{escape(group_id)}</span></h1>
<section class="cards" id="cards"></section>
<section class="charts">{_chart("chart-lag", "Total lag (records)")}</section>
<h2>Lag by partition</h2>
<table id="lag" class="grid"></table>
<h2>Members</h2>
<table id="members" class="grid"></table>
<h2>Reset offsets</h2>
<form id="reset-offsets" class="form-row">
<label>Topic <input name="topic" placeholder="all the group's topics"></label>
<label>To <select name="to"><option value="earliest">earliest</option>
<option value="latest">latest</option><option value="offset">offset</option>
<option value="time">time</option></select></label>
<label class="to-offset" hidden>Offset <input name="offset" type="number" min="0" value="0"></label>
<label class="to-time" hidden>Time <input name="time" type="datetime-local" step="1"></label>
<button type="submit">Preview…</button></form>
"""
    return _frame(f"Group {group_id}", "group", body, section="groups", data={"group": group_id})


async def broker(request: web.Request) -> web.Response:
    broker_id = request.match_info["broker_id"]
    body = f"""
<h1>Broker <span class="name">{escape(broker_id)}</span></h1>
<section class="cards" id="cards"></section>
<h2>Log directories</h2>
<table id="log-dirs" class="grid"></table>
<h2>Configs</h2>
<div class="toolbar"><input id="config-filter" type="search" placeholder="Filter configs"></div>
<table id="configs" class="grid"></table>
"""
    return _frame(
        f"Broker {broker_id}", "broker", body, section="overview", data={"broker": broker_id}
    )


async def acls(request: web.Request) -> web.Response:
    body = """
<h1>ACLs</h1>
<p id="acl-summary" class="muted"></p>
<table id="acls" class="grid"></table>
"""
    return _frame("ACLs", "acls", body, section="acls")


async def users(request: web.Request) -> web.Response:
    body = """
<h1>SCRAM users</h1>
<p id="user-summary" class="muted"></p>
<table id="users" class="grid"></table>
"""
    return _frame("Users", "users", body, section="users")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", overview)
    app.router.add_get("/topics", topics)
    app.router.add_get("/topics/{name}", topic)
    app.router.add_get("/topics/{name}/messages", messages)
    app.router.add_get("/groups", groups)
    app.router.add_get("/groups/{group}", group)
    app.router.add_get("/brokers/{broker_id}", broker)
    app.router.add_get("/acls", acls)
    app.router.add_get("/users", users)
