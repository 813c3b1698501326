// Package console holds the browser tests of the web console the server
// serves at /console/: a real server on a loopback port, with API keys on,
// driven through Debian's chromium in headless mode (chromedp). They sign
// in with a key, browse, filter and sort a type of 10,000 records, open,
// edit and conditionally save a record, follow the live change tail, read
// the health page, and check that a read-only key cannot write and a
// scoped key does not see a type outside its scope. Every request the
// browser makes must go to the server's own address and carry no key in
// its URL. Each page is saved as a PNG at 1280×800 and 390×844 into the
// test's artifact directory (go test -artifacts -outputdir DIR keeps them).
//
// chromium comes from `make chromium` (apt-get); CHROMIUM names another
// binary. Without it the tests fail, except under -short, where they skip.
package console
