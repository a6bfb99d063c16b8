// Steps view, sample page: the conversation tab — one block per message with its role, thinking collapsed,
// tool calls as chips that open to their (pretty) JSON arguments; without a conversation, the prompt and
// response texts and why there is none.

import type { DumpsSampleResp } from "../api/responseTypes/dumpsSample";
import { el } from "../shared/dom";

export function renderConversation(box: HTMLElement, s: DumpsSampleResp): void {
  box.textContent = "";
  if (!s.conversation) {
    box.append(el("div", "snote", s.conversation_note ?? "no conversation for this sample"));
    for (const [role, text] of [
      ["prompt", s.prompt_text],
      ["response", s.response_text],
    ] as const) {
      if (text === undefined) continue;
      const m = el("div", "smsg");
      m.dataset.role = role;
      m.append(el("div", "srole", role), el("pre", "stext", text));
      box.append(m);
    }
    return;
  }
  for (const msg of s.conversation.messages) {
    const mb = el("details", "smsg role-" + msg.role.replace(/[^a-z_]/gi, ""));
    mb.dataset.role = msg.role;
    mb.open = !msg.collapsed;
    const sum = el("summary", "srole", msg.role + (msg.name ? ` · ${msg.name}` : ""));
    mb.append(sum);
    for (const b of msg.blocks) {
      if (b.type === "thinking") {
        const d = el("details", "sthink");
        d.append(el("summary", "", "thinking"), el("pre", "stext", b.text ?? ""));
        mb.append(d);
      } else if (b.type === "tool_call") {
        const d = el("details", "stool");
        d.append(el("summary", "stoolchip", `tool call · ${b.name ?? "?"}${b.valid_json === false ? " (raw)" : ""}`), el("pre", "sargs", b.arguments ?? ""));
        mb.append(d);
      } else mb.append(el("pre", "stext", b.text ?? ""));
    }
    box.append(mb);
  }
}
