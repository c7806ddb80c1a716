// The dashboard's tables, for an analyst (docs/dashboard.md, "Tables"): every <table> of a page
// sorts by a column (click its header; again: the other way) and downloads as CSV (its "CSV"
// button), built here from the rows shown: nothing is fetched, no library, no build step.
//
// A cell sorts by its data-v attribute when it has one, else by the datetime of a <time> in it,
// else, in a numeric column (its header's class "num"), by the number its text begins with
// ("$1,234.50", "-3.2 %", "12 dutchie 8 · jane 4"), else by its text; empty cells ("", "–") sort
// last either way. The CSV has the header row and the body rows in the order shown, each cell its
// data-csv attribute when it has one (a change's plain number), else its text (a time shown alone:
// its ISO 8601 datetime), a text a spreadsheet would run as a formula led by ' (README, "Feeds and
// the item schema"; the rule of cannaspider/spreadsheet.py; a plain number is left as it is). A
// row that is a message across the table ("No event yet") neither sorts nor exports.
(function () {
  "use strict";
  var FORMULA = /^[=+\-@\t\r]/;
  var NUMBER = /^[-+]?\d+(\.\d+)?$/;

  function text(cell) {
    return cell.textContent.replace(/\s+/g, " ").trim();
  }
  function csvText(cell) {
    if (cell.hasAttribute("data-csv")) return cell.getAttribute("data-csv");
    var time = cell.querySelector("time[datetime]");
    return time && text(cell) === text(time) ? time.getAttribute("datetime") : text(cell);
  }
  function sortKey(cell, numeric) {
    if (cell.hasAttribute("data-v")) {
      var v = cell.getAttribute("data-v");
      return v === "" ? null : numeric && !isNaN(Number(v)) ? Number(v) : v.toLowerCase();
    }
    var time = cell.querySelector("time[datetime]");
    if (time) return Date.parse(time.getAttribute("datetime"));
    var t = text(cell);
    if (t === "" || t === "\u2013") return null;
    if (numeric) {
      var m = t.replace(/\u2212/g, "-").replace("$", "").match(/^([-+]?)([\d,]*\.?\d+)/);
      if (m) return Number(m[1] + m[2].replace(/,/g, ""));
    }
    return t.toLowerCase();
  }
  function compare(a, b) {
    if (a === null || b === null) return a === b ? 0 : a === null ? 1 : -1;
    if (typeof a !== typeof b) return typeof a === "number" ? -1 : 1;
    return typeof a === "number" ? a - b : a.localeCompare(b);
  }
  function csvCell(value) {
    if (FORMULA.test(value) && !NUMBER.test(value)) value = "'" + value;
    return /[",\r\n]/.test(value) ? '"' + value.replace(/"/g, '""') + '"' : value;
  }

  function setUp(table, index) {
    var rows = Array.prototype.slice.call(table.rows);
    if (!rows.length) return;
    var head = rows[0];
    var width = head.cells.length;
    if (!Array.prototype.every.call(head.cells, function (c) { return c.tagName === "TH"; })) return;
    var body = function () {
      return Array.prototype.slice.call(table.rows, 1).filter(function (r) { return r.cells.length === width; });
    };
    Array.prototype.forEach.call(head.cells, function (th, column) {
      th.tabIndex = 0;
      th.classList.add("sortable");
      th.title = "sort by " + text(th);
      var sort = function () {
        var descending = th.getAttribute("aria-sort") === "ascending";
        Array.prototype.forEach.call(head.cells, function (c) { c.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        var numeric = th.classList.contains("num");
        var keyed = body().map(function (row, i) { return [sortKey(row.cells[column], numeric), i, row]; });
        keyed.sort(function (a, b) {
          var order = compare(a[0], b[0]);
          if (a[0] !== null && b[0] !== null && descending) order = -order;
          return order || a[1] - b[1];
        });
        var parent = keyed.length ? keyed[0][2].parentNode : null;
        keyed.forEach(function (k) { parent.appendChild(k[2]); });
      };
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); }
      });
    });
    var name = (table.id || "table-" + (index + 1)) + ".csv";
    var button = document.createElement("button");
    button.type = "button";
    button.className = "csv";
    button.textContent = "CSV";
    button.title = "download this table as " + name;
    button.setAttribute("data-table", table.id || "");
    button.addEventListener("click", function () {
      var lines = [head].concat(body()).map(function (row) {
        return Array.prototype.map.call(row.cells, function (c) { return csvCell(csvText(c)); }).join(",");
      });
      var blob = new Blob(["\ufeff" + lines.join("\r\n") + "\r\n"], { type: "text/csv;charset=utf-8" });
      var link = document.createElement("a");
      link.href = URL.createObjectURL(blob);
      link.download = (document.body.getAttribute("data-page") || "dashboard") + "-" + name;
      document.body.appendChild(link);
      link.click();
      link.remove();
      setTimeout(function () { URL.revokeObjectURL(link.href); }, 1000);
    });
    var holder = table.parentNode.classList.contains("scroll") ? table.parentNode : table;
    var bar = document.createElement("div");
    bar.className = "table-tools";
    bar.appendChild(button);
    holder.parentNode.insertBefore(bar, holder);
  }

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll("main table"), setUp);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
