package sessionlog

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTitle(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes: cut at 256, a whole character
	for _, tc := range []struct {
		name, event string
		want        string
		ok          bool
	}{
		{"recorded", `{"type":"session/title","seq":2,"time":1784973850105,"data":{"title":"Use the bash tool to","messageSeqs":[1],"source":{"kind":"fallback"}}}`, "Use the bash tool to", true},
		{"data first", `{"data":{"source":{"title":"no"},"title":"yes"},"seq":0,"time":1,"type":"session/title"}`, "yes", true},
		{"escapes", `{"type":"session/title","seq":0,"time":1,"data":{"title":"a\"b\u00e9\n<script>"}}`, "a\"bé\n<script>", true},
		{"empty title", `{"type":"session/title","seq":0,"time":1,"data":{"title":""}}`, "", true},
		{"cut", `{"type":"session/title","seq":0,"time":1,"data":{"title":"` + long + `"}}`, strings.Repeat("é", 128), true},
		{"cut before a 3-byte char", `{"type":"session/title","seq":0,"time":1,"data":{"title":"` + strings.Repeat("a", 255) + `€"}}`, strings.Repeat("a", 255), true},
		{"title not a string", `{"type":"session/title","seq":0,"time":1,"data":{"title":7}}`, "", false},
		{"no title", `{"type":"session/title","seq":0,"time":1,"data":{"messageSeqs":[1]}}`, "", false},
		{"data not an object", `{"type":"session/title","seq":0,"time":1,"data":"x"}`, "", false},
		{"other type naming it", `{"type":"user/message","seq":0,"time":1,"data":{"text":"\"session/title\"","title":"no"}}`, "", false},
		{"request type", `{"type":"session/title-llm-request","seq":0,"time":1,"data":{"title":"no"}}`, "", false},
		{"nested type", `{"type":"x","seq":0,"time":1,"data":{"type":"session/title","title":"no"}}`, "", false},
		{"lone surrogate", `{"type":"session/title","seq":0,"time":1,"data":{"title":"a\ud800b"}}`, "a\uFFFDb", true},
		{"not JSON", `{"type":"session/title","data":{"title":"x"}`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Title([]byte(tc.event))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Title = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzTitle checks Title against encoding/json on any text: the same title
// for a JSON object (cut as Title cuts), none for anything else, never more
// than MaxTitleBytes, never a split character.
func FuzzTitle(f *testing.F) {
	f.Add(`{"type":"session/title","seq":2,"time":1,"data":{"title":"Use the bash tool to"}}`)
	f.Add(`{"type":"session/title","data":{"title":"\u00e9\ud800"}}`)
	f.Add(`{"type":"session/title","data":{"title":null}}`)
	f.Add(`{"type":"session/title","type":"x","data":{"title":"dup"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := Title([]byte(s))
		if len(got) > MaxTitleBytes || !utf8.ValidString(got) {
			t.Fatalf("Title(%q) = %q: too long, or not UTF-8", s, got)
		}
		if !ok {
			return
		}
		// A text Title takes is one JSON object (its scanner refuses
		// duplicate keys, which encoding/json would take).
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Title *string `json:"title"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(s), &ev); err != nil || ev.Type != "session/title" || ev.Data.Title == nil {
			t.Fatalf("Title(%q) = %q, but encoding/json reads %+v (%v)", s, got, ev, err)
		}
		// encoding/json makes each lone surrogate a U+FFFD, Title each run.
		if !strings.ContainsRune(*ev.Data.Title, utf8.RuneError) && got != cutTitle(*ev.Data.Title) {
			t.Fatalf("Title(%q) = %q, encoding/json reads %q", s, got, *ev.Data.Title)
		}
	})
}
