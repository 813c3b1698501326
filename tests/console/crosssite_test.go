package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// TestConsoleCrossSite opens a page of another origin in the browser and
// lets it attack a server without keys, the console's own case on
// loopback: a write it sends as a form would (no CORS preflight), a write
// with a JSON body (which needs a preflight), and reading the schema. The
// REST guard refuses the writes and CORS keeps the answer from the page:
// the type stays empty.
func TestConsoleCrossSite(t *testing.T) {
	chromiumPath(t)
	ts := servertest.New(t, server.Config{HTTPAddr: "127.0.0.1:0", NoSync: true})
	ts.MustApply(map[string]string{"shop/items.proto": itemsProto})
	api := "http://" + ts.Srv.HTTPAddr()
	body := fmt.Sprintf(`{"records": [{"@type": "type.googleapis.com/%s", "id": "1", "name": "from another site"}]}`, itemType)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><p id="out"></p><script>
const api = %q, body = %q, out = [];
(async () => {
	try {
		const r = await fetch(api + "/v1/records:upsert", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body});
		out.push("form:" + r.type);
	} catch (e) { out.push("form:error"); }
	try {
		const r = await fetch(api + "/v1/records:upsert", {method: "POST", headers: {"Content-Type": "application/json"}, body});
		out.push("json:" + r.status);
	} catch (e) { out.push("json:blocked"); }
	try {
		const r = await fetch(api + "/v1/schema");
		out.push("read:" + (await r.text()).length);
	} catch (e) { out.push("read:blocked"); }
	document.getElementById("out").textContent = out.join(" ");
	document.getElementById("out").dataset.done = "1";
})();
</script></body></html>`, api, body)
	}))
	defer evil.Close()
	// The attacking page is of another site: localhost, where the server
	// is 127.0.0.1.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	b := startBrowser(t, strings.TrimPrefix(evilURL, "http://"), nil)
	tb := b.newTab("other site")
	tb.do("load the other site", chromedp.Navigate(evilURL), chromedp.WaitVisible(`#out[data-done="1"]`))
	got := tb.text("#out")
	if !strings.Contains(got, "json:blocked") || !strings.Contains(got, "read:blocked") {
		t.Errorf("the other site's page got %q: want its JSON write and its read blocked", got)
	}
	if n := ts.Count(itemType); n != 0 {
		t.Fatalf("after the other site's requests the server holds %d items, want none", n)
	}
}
