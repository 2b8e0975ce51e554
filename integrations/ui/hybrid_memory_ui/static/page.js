// hybrid-memory-ui: the page's one script of its own (the rest is htmx).
// "all on this page": a checkbox that ticks, or unticks, every memory's checkbox of the
// bulk form; delegated from the document, so that it keeps working after htmx redraws
// the list.
document.addEventListener("change", (event) => {
  const all = event.target;
  if (!(all instanceof HTMLInputElement) || !all.hasAttribute("data-select-all")) return;
  for (const box of document.querySelectorAll('input[type=checkbox][name=ids][form="bulk-form"]')) {
    box.checked = all.checked;
  }
});
