package io.gpusched.cli.adversarial.output;

import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs gpusched in this JVM, and shell lines in bash, for the tests of this folder. */
final class Run {
    record Result(int exit, String out, String err) {
        String both() {
            return out + err;
        }
    }

    private Run() {
    }

    static Result gpusched(List<String> args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute(args.toArray(String[]::new));
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    static Result gpusched(List<String> base, String... args) {
        List<String> all = new ArrayList<>(base);
        all.addAll(List.of(args));
        return gpusched(all);
    }

    /** Runs {@code script} with {@code bash -c} in {@code dir}, {@code $1} being {@code arg}; at most 30 s. */
    static Result bash(Path dir, String script, String arg) throws IOException, InterruptedException {
        Process p = new ProcessBuilder("bash", "-c", script, "bash", arg).directory(dir.toFile()).start();
        p.getOutputStream().close();
        byte[] out = p.getInputStream().readAllBytes();
        byte[] err = p.getErrorStream().readAllBytes();
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("bash did not finish: " + script);
        }
        return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8),
                new String(err, StandardCharsets.UTF_8));
    }
}
