// Sends every listening socket it is given straight back (listener-copies.ts): the process that
// sent it receives a new file descriptor for the same socket. Plain JavaScript, forked without any
// loader. Node has this process listen on each socket it receives, so a connection accepted here
// before the copy has gone back is passed back too: none is lost. Told `done`, it leaves once
// every copy it holds has gone back and closed here (a disconnect waits for the handles queued).
// Orphaned, it leaves at once (below).
let sending = 0;
let done = false;
const leaveWhenDone = () => {
  if (done && sending === 0) process.disconnect();
};
process.on('message', (message, listener) => {
  if (message === 'done') {
    done = true;
    return leaveWhenDone();
  }
  if (message !== 'copy' || listener === undefined) return;
  sending++;
  listener.on('connection', (socket) => process.send('connection', socket));
  process.send('copy', listener, () => {
    listener.close();
    sending--;
    leaveWhenDone();
  });
});

// The gateway died before it said `done` (a crash or a kill -9 just after it started listening):
// leave at once, or a socket this process holds keeps the port taken, its connections accepted
// for no one, and the next gateway cannot listen. Node need not emit `disconnect` then (not when
// the parent died before this process started), so the parent's pid, its first argument, is watched.
const parent = Number(process.argv[2]);
const orphaned = () => process.ppid !== parent;
if (orphaned()) process.exit(0);
setInterval(() => {
  if (orphaned()) process.exit(0);
}, 100).unref();
