// Runs the static replay's own script under node with a minimal DOM, then clicks through it.
// Usage: node replay_dom.js <page.html> <clicks, e.g. "next,next,prev">
// Prints JSON: after each click, the view as a tree of {tag, cls, text, children}.
// The DOM has no innerHTML: a renderer that parsed text as markup would show nothing here.
"use strict";
const fs = require("fs");
const vm = require("vm");

const page = fs.readFileSync(process.argv[2], "utf8");
const clicks = (process.argv[3] || "").split(",").filter(Boolean);

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
  fire(type) { (this.listeners[type] || []).forEach((handler) => handler({ target: this })); }
  tree() {
    return { tag: this.tag, cls: this.className, text: this.ownText, children: this.children.map((c) => c.tree()) };
  }
}

const root = new Node("div");
const parts = { select: new Node("select"), ".view": new Node("div"), ".pos": new Node("span"),
                ".prev": new Node("button"), ".next": new Node("button") };
root.querySelector = (selector) => parts[selector];
const data = new Node("script");
const id = /id='(lobeval-replay-\w+)-data'>([\s\S]*?)<\/script>/.exec(page);
data.textContent = id[2];
const document = {
  getElementById: (name) => (name === id[1] ? root : name === id[1] + "-data" ? data : null),
  createElement: (tag) => new Node(tag),
};
const scripts = [...page.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]);
scripts.forEach((code) => vm.runInNewContext(code, { document, JSON, Number, String }));

const views = [{ pos: parts[".pos"].textContent, options: parts.select.children.map((o) => o.textContent),
                 view: parts[".view"].tree() }];
for (const click of clicks) {
  if (click.startsWith("select:")) { parts.select.value = click.slice(7); parts.select.fire("change"); }
  else parts["." + click].fire("click");
  views.push({ pos: parts[".pos"].textContent, view: parts[".view"].tree() });
}
process.stdout.write(JSON.stringify(views));
