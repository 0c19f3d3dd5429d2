import pino, { type Logger } from 'pino';

/**
 * Structured JSON logs. Nothing logs keys or tokens; redaction is the second line of defence in
 * case a header or secret ever reaches a log call.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      redact: {
        // Explicit paths only: a wildcard ('*.authorization') made every line about 3 µs dearer,
        // nearly doubling what the request line costs.
        paths: [
          'authorization',
          'headers.authorization',
          'req.headers.authorization',
          'request.headers.authorization',
          'apiKey',
          'adminToken',
          'key',
        ],
        censor: '[redacted]',
      },
    },
    // Asynchronous writes to stdout: under load, lines queued while one write is in flight go out
    // together instead of one syscall each. Call logger.flush() before exiting.
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
