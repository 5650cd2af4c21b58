// The live conversation of a group's page: new messages arrive over
// server-sent events and are added as text (never as markup).
(function () {
  "use strict";
  var list = document.getElementById("conversation");
  if (!list || !window.EventSource) {
    return;
  }
  var state = document.getElementById("live-state");
  var src = new EventSource(list.getAttribute("data-events") + "?after=" + encodeURIComponent(list.getAttribute("data-after")));
  src.addEventListener("open", function () {
    state.textContent = "Live: new messages appear here.";
  });
  src.addEventListener("error", function () {
    state.textContent = "Live updates interrupted; reconnecting…";
  });
  src.addEventListener("message", function (ev) {
    var m = JSON.parse(ev.data);
    if (document.getElementById("m" + m.id)) {
      return;
    }
    var li = document.createElement("li");
    li.id = "m" + m.id;
    li.className = "msg " + (m.direction === "out" ? "out" : "in");
    var meta = document.createElement("div");
    meta.className = "meta";
    var a = document.createElement("a");
    a.href = m.story;
    a.textContent = m.sender + " · " + m.time;
    meta.appendChild(a);
    var text = document.createElement("div");
    text.className = "text";
    text.textContent = m.text;
    li.appendChild(meta);
    li.appendChild(text);
    list.appendChild(li);
    list.scrollTop = list.scrollHeight;
  });
})();
