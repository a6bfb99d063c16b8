package semconv

import (
	"strings"
	"unicode"
)

// The run configuration record (docs/semconv.md §11): the trainer's arguments as one miles.run_config log record,
// written to the run_config stream. The emitter (python/miles_otel/runconfig.py) builds records within the
// emitter bounds below; the exporter refuses a record over the ingest limits and applies the secret rule again,
// so a client that is not the emitter cannot put a secret on disk either.

// Ingest limits of one run_config record (docs/semconv.md §11, §8.4).
const (
	RunConfigMaxArgs     = 4096 // arguments per record
	RunConfigMaxKeyBytes = 256  // bytes of one argument name
	RunConfigMaxString   = 4096 // bytes of one string value (an array item counts alone)
	RunConfigMaxList     = 256  // items of one array value
)

// RunConfigRedacted replaces the value of a secret argument.
const RunConfigRedacted = "[redacted]"

// secretLast and secretAny are the secret rule's words (docs/semconv.md §11); python/miles_otel/runconfig.py
// holds the same lists, and both are tested against testdata/run_config_secrets.json.
var (
	secretLast = map[string]bool{
		"key": true, "token": true, "secret": true, "password": true, "passwd": true,
		"pwd": true, "credential": true, "credentials": true, "apikey": true, "auth": true,
	}
	secretAny = map[string]bool{
		"password": true, "passwd": true, "secret": true, "secrets": true,
		"credential": true, "credentials": true, "apikey": true,
	}
)

// SecretArg says whether an argument's name marks its value as a secret (docs/semconv.md §11): the name is split
// into lower-case words at every character that is not a letter or a digit; it is a secret when the last word
// of the name, or of any of its dot-separated parts (a flattened mapping: auth.user is inside a secret), is key,
// token, secret, password, passwd, pwd, credential(s), apikey or auth, or when any word is password, passwd,
// secret(s), credential(s) or apikey. So wandb_key, hf_token, openai_api_key and db_password are secrets, and
// num_key_value_heads, calculate_per_token_loss and tokenizer_path are not.
func SecretArg(name string) bool {
	for part := range strings.SplitSeq(strings.ToLower(name), ".") {
		words := strings.FieldsFunc(part, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') })
		if len(words) == 0 {
			continue
		}
		if secretLast[words[len(words)-1]] {
			return true
		}
		for _, w := range words {
			if secretAny[w] {
				return true
			}
		}
	}
	return false
}

// RedactURLUserinfo replaces the user information of every URL in s ("https://user:pass@host" →
// "https://[redacted]@host"), the credentials a value can carry whatever its argument's name.
func RedactURLUserinfo(s string) string {
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		// The authority ends at the first '/', whitespace or end; userinfo is what precedes its last '@'.
		end := strings.IndexFunc(s, func(r rune) bool { return r == '/' || unicode.IsSpace(r) })
		if end < 0 {
			end = len(s)
		}
		if at := strings.LastIndexByte(s[:end], '@'); at > 0 {
			b.WriteString(RunConfigRedacted)
			s = s[at:]
		}
	}
}
