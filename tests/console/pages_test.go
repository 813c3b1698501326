package console_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/chromedp/chromedp"
)

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// open loads the console in the tab and waits for the sign-in form.
func (tb *tab) open(e *env) {
	tb.b.t.Helper()
	tb.do("load the console", chromedp.Navigate(e.base+"/console/"), chromedp.WaitVisible("#key-input"))
}

// fill empties an input and types text into it, as a user would.
func (tb *tab) fill(sel, text string) {
	tb.b.t.Helper()
	eval[chromedp.Void](tb, "empty "+sel, fmt.Sprintf(`(() => {
		const el = document.querySelector(%s);
		el.value = "";
		el.dispatchEvent(new Event("input", {bubbles: true}));
	})()`, js(sel)))
	if text != "" {
		tb.do("type into "+sel, chromedp.SendKeys(sel, text))
	}
}

// signIn loads the console and signs in with the named key, typed into
// the form as a user would.
func (tb *tab) signIn(e *env, key string) {
	tb.b.t.Helper()
	tb.open(e)
	tb.do("sign in as "+key,
		chromedp.SendKeys("#key-input", e.keys[key]),
		chromedp.Click("#key-submit"),
		chromedp.WaitVisible("#signout"))
}

// route goes to a route of the console (such as "#/types") within the
// page: a hash change, as following a link of the console is.
func (tb *tab) route(hash string) {
	tb.b.t.Helper()
	eval[chromedp.Void](tb, "go to "+hash, "location.hash = "+js(hash))
}

// text is the text of the first element sel matches ("" when none does).
func (tb *tab) text(sel string) string {
	tb.b.t.Helper()
	return eval[string](tb, "read "+sel, fmt.Sprintf(`(document.querySelector(%s)?.textContent ?? "").trim()`, js(sel)))
}

// usable reports whether an element sel matches is shown and enabled.
func (tb *tab) usable(sel string) bool {
	tb.b.t.Helper()
	return eval[bool](tb, "look for "+sel, fmt.Sprintf(`(() => {
		const el = document.querySelector(%s);
		return !!el && !el.disabled && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
	})()`, js(sel)))
}

// rowKeys are the keys of the rows of table#records, each a JSON array
// of key values rendered as text ("1", not 1 or "\"1\"").
func (tb *tab) rowKeys() []string {
	tb.b.t.Helper()
	raw := eval[[]string](tb, "read the rows", `[...document.querySelectorAll("table#records tr[data-key]")].map(r => r.dataset.key)`)
	return keysText(tb, raw)
}

// keysText renders each JSON key array as its values joined by ",".
func keysText(tb *tab, raw []string) []string {
	out := make([]string, len(raw))
	for i, k := range raw {
		var vals []any
		if err := json.Unmarshal([]byte(k), &vals); err != nil {
			tb.b.t.Fatalf("%s: data-key %q is not a JSON array: %v", tb.name, k, err)
		}
		parts := make([]string, len(vals))
		for j, v := range vals {
			parts[j] = fmt.Sprint(v)
		}
		out[i] = strings.Join(parts, ",")
	}
	return out
}

// idsText renders ids as rowKeys does.
func idsText(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}

// waitRows waits until table#records shows exactly the items of ids, in
// order, and the page info names page.
func (tb *tab) waitRows(step string, ids []int64, page int) {
	tb.b.t.Helper()
	want := idsText(ids)
	// The rows' keys are compared in the page, so that the wait ends as
	// soon as they are right, whatever the JSON type of the key values.
	tb.waitFor(step, fmt.Sprintf(`(() => {
		const want = %s;
		const rows = [...document.querySelectorAll("table#records tr[data-key]")];
		if (rows.length !== want.length) return false;
		for (let i = 0; i < rows.length; i++) {
			let k;
			try { k = JSON.parse(rows[i].dataset.key).map(String).join(","); } catch (e) { return false; }
			if (k !== want[i]) return false;
		}
		return /\b%d\b/.test(document.querySelector("#page-info")?.textContent ?? "");
	})()`, mustJSON(want), page))
	if got := tb.rowKeys(); !slices.Equal(got, want) {
		tb.b.t.Fatalf("%s: %s: rows %v, want %v", tb.name, step, got, want)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// setRecordJSON changes field of the JSON in #record-json as a user
// editing the text would.
func (tb *tab) setRecordField(field, value string) {
	tb.b.t.Helper()
	eval[chromedp.Void](tb, "edit "+field, fmt.Sprintf(`(() => {
		const ta = document.querySelector("#record-json");
		const rec = JSON.parse(ta.value);
		rec[%s] = %s;
		ta.value = JSON.stringify(rec, null, 2);
		ta.dispatchEvent(new Event("input", {bubbles: true}));
	})()`, js(field), js(value)))
}

// recordJSON is the record #record-json shows.
func (tb *tab) recordJSON() map[string]any {
	tb.b.t.Helper()
	raw := eval[string](tb, "read the record", `document.querySelector("#record-json").value`)
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		tb.b.t.Fatalf("%s: #record-json is not a JSON object: %v: %q", tb.name, err, raw)
	}
	return m
}

// choose selects the option of value in a select, and in a multiple
// select that option alone, and tells the page, as a user choosing it
// would.
func (tb *tab) choose(sel, value string) {
	tb.b.t.Helper()
	ok := eval[bool](tb, "choose "+value+" in "+sel, fmt.Sprintf(`(() => {
		const s = document.querySelector(%s);
		if (!s || ![...s.options].some(o => o.value === %s)) return false;
		for (const o of s.options) o.selected = o.value === %[2]s;
		s.dispatchEvent(new Event("input", {bubbles: true}));
		s.dispatchEvent(new Event("change", {bubbles: true}));
		return true;
	})()`, js(sel), js(value)))
	if !ok {
		tb.b.t.Fatalf("%s: %s has no option %q", tb.name, sel, value)
	}
}

// changeKeys are the keys of the entries of ol#changes of type typ.
func (tb *tab) changeKeys(typ string) []string {
	tb.b.t.Helper()
	raw := eval[[]string](tb, "read the changes", fmt.Sprintf(
		`[...document.querySelectorAll("ol#changes li[data-op]")].filter(li => li.dataset.type === %s).map(li => li.dataset.key)`, js(typ)))
	return keysText(tb, raw)
}

// changeOps are the entries of ol#changes of type typ as "OP key".
func (tb *tab) changeOps(typ string) []string {
	tb.b.t.Helper()
	raw := eval[[][2]string](tb, "read the changes", fmt.Sprintf(
		`[...document.querySelectorAll("ol#changes li[data-op]")].filter(li => li.dataset.type === %s).map(li => [li.dataset.op, li.dataset.key])`, js(typ)))
	out := make([]string, len(raw))
	for i, r := range raw {
		out[i] = r[0] + " " + keysText(tb, []string{r[1]})[0]
	}
	return out
}

// page clicks #next-page or #prev-page once the rows it pages through
// have loaded (the buttons are disabled while a page loads).
func (tb *tab) page(button string) {
	tb.b.t.Helper()
	tb.do("click "+button, chromedp.WaitEnabled(button), chromedp.Click(button))
}

// unnamedControls lists the visible form controls and buttons that a
// screen reader could not name: no label, no aria-label(ledby), and for a
// button no text.
func (tb *tab) unnamedControls() []string {
	tb.b.t.Helper()
	return eval[[]string](tb, "look for unnamed controls", `[...document.querySelectorAll("input, select, textarea, button")]
		.filter(el => el.getClientRects().length > 0 && el.type !== "hidden")
		.filter(el => !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby") &&
			!(el.tagName === "BUTTON" && el.textContent.trim()))
		.map(el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : ""))`)
}

// lowContrast lists the visible text of the page whose colour against
// its background is below WCAG AA: 4.5:1, or 3:1 for large text (24 px,
// or 18.66 px bold). Text of disabled controls is exempt, as in WCAG.
func (tb *tab) lowContrast() []string {
	tb.b.t.Helper()
	return eval[[]string](tb, "measure contrast", `(() => {
		const rgba = s => (s.match(/[\d.]+/g) || []).map(Number);
		const lum = ([r, g, b]) => {
			const c = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
			return 0.2126 * c(r) + 0.7152 * c(g) + 0.0722 * c(b);
		};
		// The colour behind el: the nearest opaque background, blended
		// with the translucent ones above it.
		const behind = el => {
			const layers = [];
			for (let e = el; e; e = e.parentElement) {
				const c = rgba(getComputedStyle(e).backgroundColor);
				if (c.length === 4 && c[3] === 0) continue;
				layers.push(c);
				if (c.length === 3 || c[3] === 1) break;
			}
			let base = [255, 255, 255];
			for (const c of layers.reverse()) {
				const a = c.length === 4 ? c[3] : 1;
				base = base.map((v, i) => v * (1 - a) + c[i] * a);
			}
			return base;
		};
		const out = [];
		for (const el of document.querySelectorAll("body *")) {
			const text = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join("").trim();
			if (!text || el.getClientRects().length === 0 || el.closest(":disabled")) continue;
			const st = getComputedStyle(el);
			if (st.visibility === "hidden" || Number(st.opacity) === 0) continue;
			const fg = rgba(st.color), bg = behind(el);
			const a = fg.length === 4 ? fg[3] : 1;
			const fgOn = fg.slice(0, 3).map((v, i) => v * a + bg[i] * (1 - a));
			const [hi, lo] = [lum(fgOn), lum(bg)].sort((x, y) => y - x);
			const ratio = (hi + 0.05) / (lo + 0.05);
			const size = parseFloat(st.fontSize), bold = Number(st.fontWeight) >= 700;
			const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
			if (ratio < need) {
				out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + " " + JSON.stringify(text.slice(0, 30)) + " " + ratio.toFixed(2) + ":1");
			}
		}
		return out;
	})()`)
}

// unreachable lists the visible, enabled controls and links the keyboard
// cannot reach: taken out of the tab order with a negative tabindex.
func (tb *tab) unreachable() []string {
	tb.b.t.Helper()
	return eval[[]string](tb, "look for controls out of the tab order", `[...document.querySelectorAll("input, select, textarea, button, a[href]")]
		.filter(el => el.getClientRects().length > 0 && el.type !== "hidden" && !el.disabled && el.tabIndex < 0)
		.map(el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : ""))`)
}
