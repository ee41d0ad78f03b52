// Runs the static replay's own script under node with a minimal DOM, then clicks through it.
// Usage: node replay_dom.js <page.html> <clicks, e.g. "next,next,prev,select:1,link:replay-x-0,hash:replay-y-0">
//        [<the URL's fragment when the page opens>]
// "link:NAME" clicks a link to #NAME somewhere on the page; "hash:NAME" changes the URL's fragment to #NAME.
// Prints JSON: after each click, the view as a tree of {tag, cls, text, children}, the position, the
// selected conversation and how often the replay scrolled itself into view.
// The DOM has no innerHTML: a renderer that parsed text as markup would show nothing here.
"use strict";
const fs = require("fs");
const vm = require("vm");

const page = fs.readFileSync(process.argv[2], "utf8");
const clicks = (process.argv[3] || "").split(",").filter(Boolean);
const location = { hash: process.argv[4] || "" };

class Node {
  constructor(tag) {
    this.tag = tag; this.className = ""; this.children = []; this.listeners = {}; this.value = "";
    this.ownText = undefined;
  }
  set textContent(text) { this.ownText = String(text); this.children = []; }
  get textContent() { return this.ownText !== undefined ? this.ownText : this.children.map((c) => c.textContent).join(""); }
  appendChild(child) { this.children.push(child); return child; }
  replaceChildren() { this.children = []; this.ownText = undefined; }
  addEventListener(type, handler) { (this.listeners[type] = this.listeners[type] || []).push(handler); }
  fire(type, target) { (this.listeners[type] || []).forEach((handler) => handler({ target: target || this })); }
  tree() {
    return { tag: this.tag, cls: this.className, text: this.ownText, children: this.children.map((c) => c.tree()) };
  }
}

const root = new Node("div");
let scrolled = 0;
root.scrollIntoView = () => { scrolled += 1; };
const parts = { select: new Node("select"), ".view": new Node("div"), ".pos": new Node("span"),
                ".prev": new Node("button"), ".next": new Node("button") };
root.querySelector = (selector) => parts[selector];
const data = new Node("script");
const id = /id='(lobeval-replay-\w+)-data'>([\s\S]*?)<\/script>/.exec(page);
data.textContent = id[2];
const body = new Node("document");
const window = new Node("window");
window.location = location;
const document = {
  getElementById: (name) => (name === id[1] ? root : name === id[1] + "-data" ? data : null),
  createElement: (tag) => new Node(tag),
  addEventListener: (type, handler) => body.addEventListener(type, handler),
};
const scripts = [...page.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]);
scripts.forEach((code) => vm.runInNewContext(code, { document, window, JSON, Number, String, decodeURIComponent }));

const state = () => ({ pos: parts[".pos"].textContent, selected: parts.select.value, scrolled,
                       view: parts[".view"].tree() });
const views = [{ ...state(), options: parts.select.children.map((o) => o.textContent) }];
for (const click of clicks) {
  if (click.startsWith("select:")) { parts.select.value = click.slice(7); parts.select.fire("change"); }
  else if (click.startsWith("link:")) {
    const link = { getAttribute: (name) => (name === "href" ? "#" + click.slice(5) : null) };
    body.fire("click", { closest: (selector) => (selector === "a" ? link : null) });
  } else if (click.startsWith("hash:")) { location.hash = "#" + click.slice(5); window.fire("hashchange"); }
  else parts["." + click].fire("click");
  views.push(state());
}
process.stdout.write(JSON.stringify(views));
