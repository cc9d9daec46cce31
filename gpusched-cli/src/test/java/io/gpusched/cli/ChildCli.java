package io.gpusched.cli;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs the gpusched command in a child JVM (another process on the node), on the test classpath. */
final class ChildCli {
    record Result(int exit, String out) {
    }

    private ChildCli() {
    }

    static Process start(Path state, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", System.getProperty("java.class.path"),
                GpuschedCommand.class.getName(), "--state-dir", state.toString()));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectErrorStream(true).start();
    }

    static Result run(Path state, String... args) throws IOException, InterruptedException {
        Process p = start(state, args);
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("gpusched " + String.join(" ", args) + " did not finish: " + out);
        }
        return new Result(p.exitValue(), out);
    }
}
