package io.gpusched.cli.adversarial;

import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Runs gpusched in this JVM (cheap) or in a child JVM (another process on the node); reads /proc independently. */
final class Cli {
    record Result(int exit, String out, String err) {
    }

    private Cli() {
    }

    static Result run(Path state, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        List<String> all = new ArrayList<>(List.of("--state-dir", state.toString()));
        all.addAll(List.of(args));
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute(all.toArray(String[]::new));
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    static Process start(Path state, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", System.getProperty("java.class.path"),
                GpuschedCommand.class.getName(), "--state-dir", state.toString()));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectErrorStream(true).start();
    }

    /** @return true while /proc/pid/stat exists with a state other than zombie or dead (read here, not by gpusched) */
    static boolean running(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"), StandardCharsets.ISO_8859_1);
            char state = stat.substring(stat.lastIndexOf(')') + 1).trim().charAt(0);
            return state != 'Z' && state != 'X';
        } catch (NoSuchFileException e) {
            return false;
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
