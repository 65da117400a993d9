// The overview's live chart: the server draws it; this fetches it again
// every few seconds (data-every, in ms) and swaps it in. No library.
(function () {
  var chart = document.getElementById("chart");
  if (!chart) return;
  var every = parseInt(chart.dataset.every, 10) || 3000;
  function refresh() {
    fetch(chart.dataset.src, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) { chart.innerHTML = html; chart.classList.remove("stale"); })
      .catch(function () { chart.classList.add("stale"); })
      .finally(function () { setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
})();
