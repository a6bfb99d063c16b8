import test from "node:test";
import assert from "node:assert/strict";
import { FrameScheduler } from "../../src/shared/frames";

/** A scheduler on a hand-driven frame clock. */
function clock() {
  const queue: (() => void)[] = [];
  const errors: unknown[] = [];
  const s = new FrameScheduler(
    (cb) => queue.push(cb),
    (e) => errors.push(e),
  );
  return { s, queue, errors, tick: () => queue.splice(0).forEach((cb) => cb()) };
}

test("repaints asked for before a frame run together in that one frame, each once", () => {
  const { s, queue, tick } = clock();
  const ran: string[] = [];
  const a = () => ran.push("a");
  const b = () => ran.push("b");
  s.request(a);
  s.request(b);
  s.request(a);
  assert.equal(queue.length, 1, "one animation frame for all");
  assert.ok(s.isPending(a));
  tick();
  assert.deepEqual(ran, ["a", "b"]);
  assert.ok(!s.isPending(a));
  tick();
  assert.deepEqual(ran, ["a", "b"], "nothing runs without a new request");
});

test("a repaint asked for while a frame runs waits for the next frame", () => {
  const { s, queue, tick } = clock();
  let n = 0;
  const again = () => {
    n++;
    if (n < 3) s.request(again);
  };
  s.request(again);
  tick();
  assert.equal(n, 1);
  assert.equal(queue.length, 1);
  tick();
  tick();
  assert.equal(n, 3);
  assert.equal(queue.length, 0);
});

test("one failing repaint does not keep the others from drawing", () => {
  const { s, errors, tick } = clock();
  const ran: string[] = [];
  s.request(() => {
    throw new Error("boom");
  });
  s.request(() => ran.push("b"));
  tick();
  assert.deepEqual(ran, ["b"]);
  assert.equal((errors[0] as Error)?.message, "boom", "the error is reported");
});
