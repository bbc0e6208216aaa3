// longctx-eval leaderboard site: click a column title to sort its table (numbers high first, text A-Z first).
// Cells without a sort key (not evaluated, over window, failed, a dash) stay last in either direction.
(function () {
  "use strict";

  function keyOf(cell) {
    if (!cell || !cell.hasAttribute("data-sort")) return null;
    var raw = cell.getAttribute("data-sort");
    if (cell.getAttribute("data-type") === "number") return Number(raw);
    return raw.toLowerCase();
  }

  function sortTable(table, column, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = rows.some(function (r) {
      var c = r.cells[column];
      return c && c.getAttribute("data-type") === "number";
    });
    var current = th.getAttribute("aria-sort");
    var descending = current ? current === "ascending" : numeric;
    var order = rows.map(function (row, i) { return { row: row, key: keyOf(row.cells[column]), i: i }; });
    order.sort(function (a, b) {
      if (a.key === null || b.key === null) {
        if (a.key === b.key) return a.i - b.i;
        return a.key === null ? 1 : -1;
      }
      if (a.key < b.key) return descending ? 1 : -1;
      if (a.key > b.key) return descending ? -1 : 1;
      return a.i - b.i;
    });
    order.forEach(function (o) { body.appendChild(o.row); });
    Array.prototype.forEach.call(th.parentNode.children, function (other) { other.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, column) {
      var button = th.querySelector("button");
      if (button) button.addEventListener("click", function () { sortTable(table, column, th); });
    });
  });
})();
