package io.gpusched.service;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;

/** An attached client in a test: records what the job sends; {@link #leave()} makes every later write fail. */
final class RecordingSink implements JobSink {
    final ByteArrayOutputStream out = new ByteArrayOutputStream();
    final ByteArrayOutputStream err = new ByteArrayOutputStream();
    final List<String> events = new CopyOnWriteArrayList<>();
    final AtomicBoolean left = new AtomicBoolean();
    volatile Integer code;
    volatile String signal;

    void leave() {
        left.set(true);
    }

    private void check() throws IOException {
        if (left.get()) {
            throw new IOException("the client has gone (test)");
        }
    }

    @Override
    public boolean gone() {
        return left.get();
    }

    @Override
    public void queued(int position) throws IOException {
        check();
        events.add("queued " + position);
    }

    @Override
    public void started(Job job) throws IOException {
        check();
        events.add("started " + job.id);
    }

    @Override
    public synchronized void output(boolean stderr, byte[] b, int len) throws IOException {
        check();
        (stderr ? err : out).write(b, 0, len);
    }

    @Override
    public void heartbeat() throws IOException {
        check();
    }

    @Override
    public void exit(int c, String s) throws IOException {
        code = c;
        signal = s;
        events.add("exit " + c + " " + s);
        check();
    }

    synchronized String stdout() {
        return out.toString(StandardCharsets.UTF_8);
    }

    synchronized String stderr() {
        return err.toString(StandardCharsets.UTF_8);
    }
}
