// The console's only script (no inline scripts: the CSP allows 'self' only).
// Copy buttons: <button data-copy="ID"> copies the value of the field with that id.
"use strict";
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copy);
  if (!field) return;
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(field.value);
    button.textContent = "Copied";
  } catch (error) {
    // No clipboard (an insecure origin): select the text for Ctrl+C instead.
    field.focus();
    field.select();
    button.textContent = "Press Ctrl+C";
  }
  setTimeout(() => { button.textContent = label; }, 2000);
});
