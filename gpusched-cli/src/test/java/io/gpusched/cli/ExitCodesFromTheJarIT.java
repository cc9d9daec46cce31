package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.host.ExitCode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * The one table of exit codes ({@link ExitCode}, README's "Exit codes"), each code produced by the command a user
 * runs: {@code java -jar gpusched.jar ...} and the container entry point {@code YarnContainerGpus} from the same
 * jar's class path, in child JVMs. The same error exits with the same code from both: the ledger that cannot be read
 * (4), the container without GPUs (3), a bad argument (2). Every code of the table must be produced here.
 */
class ExitCodesFromTheJarIT {
    private static final String CONTAINER = "container_1700000000000_0001_01_000009";
    /** Codes produced so far; the methods run 2 at a time (each its own child JVMs), so the set is synchronized. */
    private static final Set<ExitCode> SEEN = Collections.synchronizedSet(EnumSet.noneOf(ExitCode.class));
    private static Path jar;

    @TempDir
    Path tmp;

    record Run(int exit, String out, String err) {
    }

    @BeforeAll
    static void theJar() {
        jar = Path.of("target", "gpusched.jar").toAbsolutePath();
        assertThat(jar).as("built by package, before integration tests").isRegularFile();
    }

    @AfterAll
    static void everyCodeOfTheTableIsProduced() {
        assertThat(SEEN).as("codes produced by these tests").isEqualTo(EnumSet.allOf(ExitCode.class));
    }

    private Run run(List<String> command) throws Exception {
        // C1 only and the serial collector: less start-up work for each short-lived command on a 2-core machine;
        // no exit code depends on them
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto"));
        cmd.addAll(command);
        Path out = tmp.resolve("out-" + System.nanoTime());
        Path err = tmp.resolve("err-" + System.nanoTime());
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(tmp.toFile()).redirectOutput(out.toFile())
                .redirectError(err.toFile());
        pb.environment().keySet().removeIf(k -> k.startsWith("GPUSCHED_") || k.equals("CLASSPATH")
                || k.equals("JAVA_TOOL_OPTIONS") || k.equals("CONTAINER_ID"));
        pb.environment().put("GPUSCHED_SOCKET", tmp.resolve("no-service.sock").toString());
        Process p = pb.start();
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("%s answered", command).isTrue();
        return new Run(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8),
                Files.readString(err, StandardCharsets.UTF_8));
    }

    private Run gpusched(Path state, String... args) throws Exception {
        List<String> c = new ArrayList<>(List.of("-jar", jar.toString(), "--simulate", "dgx1-v100", "--state-dir",
                state.toString()));
        c.addAll(List.of(args));
        return run(c);
    }

    private Run yarn(Path state, String... args) throws Exception {
        List<String> c = new ArrayList<>(List.of("-cp", jar.toString(), "io.gpusched.yarn.YarnContainerGpus",
                "--inventory", "simulated:dgx1-v100", "--state-dir", state.toString()));
        c.addAll(List.of(args));
        return run(c);
    }

    private static void expect(Run r, ExitCode code, String what) {
        assertThat(r.exit()).as("%s: out %s err %s", what, r.out(), r.err()).isEqualTo(code.code());
        SEEN.add(code);
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void theTableIsWhatItSays() {
        assertThat(EnumSet.allOf(ExitCode.class)).extracting(ExitCode::code).containsExactly(0, 1, 2, 3, 4, 126, 127);
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void aRunWhoseCommandCannotStartIsWhatAShellSays() throws Exception {
        Path state = Files.createDirectory(tmp.resolve("run-state"));
        Run missing = gpusched(state, "run", "--no-isolation", "--gpu=1", "--", tmp.resolve("no-such").toString());
        expect(missing, ExitCode.COMMAND_NOT_FOUND, "run of a command that does not exist");
        assertThat(missing.err()).contains("cannot start").contains("no such file");
        Path plain = Files.writeString(tmp.resolve("plain.sh"), "echo never\n");
        Run notExecutable = gpusched(state, "run", "--no-isolation", "--gpu=1", "--", plain.toString());
        expect(notExecutable, ExitCode.COMMAND_NOT_RUNNABLE, "run of a file that is not executable");
        assertThat(notExecutable.err()).contains("cannot start").contains("not an executable file");
        Run status = gpusched(state, "status");
        expect(status, ExitCode.OK, "status after the runs");
        assertThat(status.out()).as("nothing left held").contains("0 allocations");
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void doneIsZeroAndADriftingCheckIsOne() throws Exception {
        Path state = Files.createDirectory(tmp.resolve("state"));
        Run list = gpusched(state, "list");
        expect(list, ExitCode.OK, "list");
        Run gres = gpusched(state, "export", "slurm", "--cores", "none");
        expect(gres, ExitCode.OK, "export slurm");
        Path bad = Files.writeString(tmp.resolve("gres.conf"), gres.out()
                .replaceAll("(?m)^.*File=/dev/nvidia5 .*\n", ""));
        Run drift = gpusched(state, "export", "slurm", "--cores", "none", "--check", bad.toString());
        expect(drift, ExitCode.FAILED, "export slurm --check on a drifting file");
        assertThat(drift.out()).contains("missing File=/dev/nvidia5");
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void aUsageErrorAndARefusalAreTwoFromBoth() throws Exception {
        Path state = Files.createDirectory(tmp.resolve("state"));
        Run unknown = gpusched(state, "allocate", "--gpu=1", "--no-such-option");
        expect(unknown, ExitCode.REFUSED, "an unknown option");
        Run tooBig = gpusched(state, "allocate", "--gpu=9");
        expect(tooBig, ExitCode.REFUSED, "9 GPUs of 8");
        assertThat(tooBig.err()).startsWith("gpusched: NODE_TOO_SMALL: ");
        Run badId = gpusched(state, "env", "--container", "42");
        expect(badId, ExitCode.REFUSED, "env with a bad container id");
        Run yarnBadId = yarn(state, "42");
        expect(yarnBadId, ExitCode.REFUSED, "YarnContainerGpus with a bad container id");
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void aContainerWithoutGpusIsThreeFromBoth() throws Exception {
        Path state = Files.createDirectory(tmp.resolve("state"));
        expect(gpusched(state, "allocate", "--gpu=1"), ExitCode.OK, "a first allocation makes the ledger");
        Run env = gpusched(state, "env", "--container", CONTAINER);
        expect(env, ExitCode.NO_GPUS, "env for a container without GPUs");
        Run yarn = yarn(state, CONTAINER);
        expect(yarn, ExitCode.NO_GPUS, "YarnContainerGpus for a container without GPUs");
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void aLedgerThatCannotBeReadIsFourFromBoth() throws Exception {
        Path empty = Files.createDirectory(tmp.resolve("empty"));
        Run env = gpusched(empty, "env", "--container", CONTAINER);
        expect(env, ExitCode.NODE_UNREADABLE, "env on a directory without a ledger");
        assertThat(env.err()).startsWith("gpusched: UNREADABLE: ");
        Run yarn = yarn(empty, CONTAINER);
        expect(yarn, ExitCode.NODE_UNREADABLE, "YarnContainerGpus on a directory without a ledger");
        assertThat(yarn.err()).startsWith("gpusched: UNREADABLE: ");
        // a damaged ledger: the same code
        Path state = Files.createDirectory(tmp.resolve("state"));
        expect(gpusched(state, "allocate", "--gpu=1"), ExitCode.OK, "a first allocation makes the ledger");
        Path ledger = state.resolve("ledger");
        List<String> lines = new ArrayList<>(Files.readAllLines(ledger));
        lines.add(lines.size() - 1, "2 00000000 {\"damaged\": true}");
        Files.write(ledger, lines);
        Run damaged = gpusched(state, "env", "--container", CONTAINER);
        expect(damaged, ExitCode.NODE_UNREADABLE, "env on a damaged ledger");
        Run damagedYarn = yarn(state, CONTAINER);
        expect(damagedYarn, ExitCode.NODE_UNREADABLE, "YarnContainerGpus on a damaged ledger");
    }
}
