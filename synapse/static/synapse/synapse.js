// Synapse web UI: small progressive enhancements. Every page works without this file.
(function () {
  "use strict";

  // Copy buttons: <button data-copy="#input-id">
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source) return;
    var text = source.value || source.textContent;
    var done = function () {
      var label = button.textContent;
      button.textContent = "Copied";
      button.classList.add("copied");
      setTimeout(function () { button.textContent = label; button.classList.remove("copied"); }, 1600);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallback(source) && done(); });
    } else if (fallback(source)) {
      done();
    }
  });

  function fallback(source) {
    source.focus();
    if (source.select) source.select();
    try { return document.execCommand("copy"); } catch (error) { return false; }
  }

  // Read-only fields that select their whole value on focus (the new key).
  document.addEventListener("focusin", function (event) {
    if (event.target.matches("[data-select-on-focus]")) event.target.select();
  });

  // Forms that ask before doing something drastic: <form data-confirm="…">
  document.addEventListener("submit", function (event) {
    var message = event.target.getAttribute("data-confirm");
    if (message && !window.confirm(message)) event.preventDefault();
  });

  // "Select all" for checkbox selections, and a live count on the bulk button.
  function boxes(name) {
    return Array.prototype.slice.call(document.querySelectorAll('input[type=checkbox][name="' + name + '"]'));
  }
  function refresh(name) {
    var checked = boxes(name).filter(function (box) { return box.checked; }).length;
    document.querySelectorAll('[data-selection-count="' + name + '"]').forEach(function (button) {
      if (!button.dataset.label) button.dataset.label = button.textContent;
      button.textContent = checked ? button.dataset.label + " (" + checked + ")" : button.dataset.label;
      button.disabled = checked === 0;
    });
    document.querySelectorAll('[data-select-all="' + name + '"]').forEach(function (all) {
      var total = boxes(name).length;
      all.checked = total > 0 && checked === total;
      all.indeterminate = checked > 0 && checked < total;
    });
  }
  document.addEventListener("change", function (event) {
    var all = event.target.getAttribute("data-select-all");
    if (all) {
      boxes(all).forEach(function (box) { box.checked = event.target.checked; });
      refresh(all);
    } else if (event.target.name && event.target.type === "checkbox") {
      refresh(event.target.name);
    }
  });
  // Host picker (Connect an agent): one host at a time, chosen by the links of
  // <nav data-host-picker>, remembered in the URL's fragment (and so across the key form's
  // post). Without this script every host is shown, one after the other.
  function showHost(picker, id) {
    var links = Array.prototype.slice.call(picker.querySelectorAll("a[href^='#host-']"));
    if (!links.some(function (link) { return link.hash === "#" + id; })) id = links[0].hash.slice(1);
    links.forEach(function (link) {
      var section = document.getElementById(link.hash.slice(1));
      var chosen = link.hash === "#" + id;
      if (section) section.hidden = !chosen;
      if (chosen) link.setAttribute("aria-current", "true"); else link.removeAttribute("aria-current");
    });
    document.querySelectorAll("form[data-keep-host]").forEach(function (form) {
      form.action = window.location.pathname + "#" + id;
    });
  }
  document.addEventListener("click", function (event) {
    var link = event.target.closest("[data-host-picker] a[href^='#host-']");
    if (!link) return;
    event.preventDefault();
    history.replaceState(null, "", link.hash);
    showHost(link.closest("[data-host-picker]"), link.hash.slice(1));
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-host-picker]").forEach(function (picker) {
      showHost(picker, window.location.hash.slice(1));
    });
    // On a phone, unused filters fold away behind their summary.
    if (window.matchMedia("(max-width: 600px)").matches) {
      document.querySelectorAll("details[data-collapse-narrow]").forEach(function (panel) {
        panel.open = false;
      });
    }
    document.querySelectorAll("[data-selection-count]").forEach(function (button) {
      refresh(button.getAttribute("data-selection-count"));
    });
  });
})();
