// What the card page and the inbox share: a secret read from the URL fragment (which browsers
// never send to a server) leaves the address bar and the tab's history at once (the entry is
// replaced by the bare address) and waits in this tab's sessionStorage under `key`, so a
// reload still works while a copied address, a screenshot or another tab shows no secret.
// `read` picks the secret out of the fragment's text.
"use strict";
window.egressgateTakeSecret = function (key, read) {
  const named = location.hash ? read(location.hash.replace(/^#/, "")) : "";
  if (location.hash) history.replaceState(null, "", location.pathname + location.search);
  try {
    if (named) { sessionStorage.setItem(key, named); return named; }
    return sessionStorage.getItem(key) || "";
  } catch (e) {
    return named; // storage refused (privacy settings): this load still works
  }
};
