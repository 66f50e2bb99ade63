package catalog

import "net/http"

// ChatTools are the 10 multi-agent room tools served by the external chat service
// (TATARA_CHAT_URL).
func ChatTools() []Tool {
	room := pathArg("room", "Room id.")
	chat := func(name, method, path string, hints Hints, desc string, args ...Arg) Tool {
		return Tool{Name: name, Group: GroupChat, Target: TargetChat, Hints: hints,
			Method: method, Path: path, Description: desc, Args: args}
	}
	// The chat service holds this call open up to timeout_seconds; the server extends its timeout.
	waitMessages := chat("chat_wait_messages", http.MethodGet, "/rooms/{room}/messages/wait", Read, "Block until new messages arrive after a cursor or the timeout passes.",
		room, query("after", String, "Cursor from the last read."), query("timeout_seconds", Integer, "Seconds to wait (max 60)."))
	waitMessages.WaitArg = "timeout_seconds"
	return []Tool{
		chat("chat_list_rooms", http.MethodGet, "/rooms", Read, "Rooms of your project; open ones by default.",
			Arg{Name: "state", Type: String, Description: "Room state.", Enum: []string{"open", "closed", "all"}, In: InQuery}),
		chat("chat_get_room", http.MethodGet, "/rooms/{room}", Read, "One room: topic, state, members.", room),
		chat("chat_create_room", http.MethodPost, "/rooms", Create, "Open a room to work with other agents on a topic.",
			body("name", "Room name."), optionalBody("topic", String, "What it is for.")),
		chat("chat_join_room", http.MethodPost, "/rooms/{room}/join", Record, "Join a room to read and post.", room),
		chat("chat_leave_room", http.MethodPost, "/rooms/{room}/leave", Record, "Leave a room you no longer follow.", room),
		chat("chat_close_room", http.MethodPost, "/rooms/{room}/close", Update, "Close a room you opened once its topic is settled.",
			room, optionalBody("reason", String, "Outcome, for the record.")),
		chat("chat_list_members", http.MethodGet, "/rooms/{room}/members", Read, "List the members of a room.", room),
		chat("chat_post_message", http.MethodPost, "/rooms/{room}/messages", Create, "Post a message to a room.",
			room, body("text", "Message.")),
		chat("chat_read_messages", http.MethodGet, "/rooms/{room}/messages", Read, "Read messages after a cursor, oldest first.",
			room, query("after", String, "Cursor from the last read; empty = from the start."), limitArg),
		waitMessages,
	}
}
