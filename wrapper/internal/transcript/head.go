package transcript

import (
	"bytes"
	"encoding/json"
)

// headFields is what walkHead recovers from the start of an oversize line.
type headFields struct {
	typ, subtype, uuid, messageID string
	blockType, blockID, blockName string
	toolUseID                     string
}

// walkHead reads the head of a JSON object token by token and keeps the fields it knows, until
// the head ends (mid-value, by construction) or stops making sense. It never fails.
func walkHead(head []byte) headFields {
	var h headFields
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return h
	}
	for dec.More() {
		key, ok := nextString(dec)
		if !ok {
			return h
		}
		var target *string
		switch key {
		case "type":
			target = &h.typ
		case "subtype":
			target = &h.subtype
		case "uuid":
			target = &h.uuid
		case "message":
			if !walkMessage(dec, &h) {
				return h
			}
			continue
		}
		if target != nil {
			if *target, ok = nextString(dec); !ok {
				return h
			}
			continue
		}
		if !skipValue(dec) {
			return h
		}
	}
	return h
}

// walkMessage reads message.id and the first content block's identifying fields.
func walkMessage(dec *json.Decoder, h *headFields) bool {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		key, ok := nextString(dec)
		if !ok {
			return false
		}
		switch key {
		case "id":
			if h.messageID, ok = nextString(dec); !ok {
				return false
			}
		case "content":
			if !walkFirstBlock(dec, h) {
				return false
			}
		default:
			if !skipValue(dec) {
				return false
			}
		}
	}
	_, err := dec.Token() // '}'
	return err == nil
}

func walkFirstBlock(dec *json.Decoder, h *headFields) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	if tok != json.Delim('[') {
		return true // a string prompt: a scalar token, already consumed
	}
	first := true
	for dec.More() {
		if !first {
			if !skipValue(dec) {
				return false
			}
			continue
		}
		first = false
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return false
		}
		for dec.More() {
			key, ok := nextString(dec)
			if !ok {
				return false
			}
			var target *string
			switch key {
			case "type":
				target = &h.blockType
			case "id":
				target = &h.blockID
			case "name":
				target = &h.blockName
			case "tool_use_id":
				target = &h.toolUseID
			}
			if target != nil {
				if *target, ok = nextString(dec); !ok {
					return false
				}
				continue
			}
			if !skipValue(dec) {
				return false
			}
		}
		if _, err := dec.Token(); err != nil { // '}'
			return false
		}
	}
	_, err = dec.Token() // ']'
	return err == nil
}

// nextString reads one token; ok only if it is a string.
func nextString(dec *json.Decoder) (string, bool) {
	tok, err := dec.Token()
	if err != nil {
		return "", false
	}
	s, ok := tok.(string)
	return s, ok
}

// skipValue consumes one value of any shape.
func skipValue(dec *json.Decoder) bool {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return true
		}
	}
}
