package io.gpusched.cli.adversarial.review14;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.yarn.YarnContainerGpus;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review14: README's "Exit codes" is one table for {@code gpusched} and the container entry point
 * {@code YarnContainerGpus}; "the same error exits with the same code from every entry point". These find a cause
 * whose code differs between the two entry points, and a command path whose code is in no row of the table.
 */
@Tag("adversarial")
@Timeout(120)
class ExitCodeTableTest {
    static final String CONTAINER = "container_1700000000000_0001_01_000002";

    @TempDir
    Path dir;

    record Result(int exit, String out, String err) {
    }

    private static Result gpusched(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Map<String, String> env = new HashMap<>(System.getenv());
        env.remove("GPUSCHED_SOCKET");
        env.remove("CONTAINER_ID");
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), env).execute(args);
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static Result yarnEntryPoint(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), YarnContainerGpus.class.getName()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.environment().remove("CONTAINER_ID");
        Path out = Files.createTempFile(Path.of(System.getProperty("java.io.tmpdir")), "r14-out", ".txt");
        Path err = Files.createTempFile(Path.of(System.getProperty("java.io.tmpdir")), "r14-err", ".txt");
        try {
            Process p = pb.redirectOutput(out.toFile()).redirectError(err.toFile()).start();
            if (!p.waitFor(90, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor();
                throw new AssertionError("YarnContainerGpus did not end in 90 s");
            }
            return new Result(p.exitValue(), Files.readString(out), Files.readString(err));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    /** The codes README's "### Exit codes" table lists, read from README.md. */
    private static TreeSet<Integer> readmeCodes() throws Exception {
        Path readme = Path.of("").toAbsolutePath();
        while (!Files.exists(readme.resolve("README.md")) || !Files.exists(readme.resolve("mvnw"))) {
            readme = readme.getParent();
        }
        String text = Files.readString(readme.resolve("README.md"));
        int from = text.indexOf("### Exit codes");
        int to = text.indexOf("\n### ", from + 5);
        Matcher m = Pattern.compile("(?m)^\\| (\\d+) \\| `").matcher(text.substring(from, to));
        TreeSet<Integer> codes = new TreeSet<>();
        while (m.find()) {
            codes.add(Integer.parseInt(m.group(1)));
        }
        return codes;
    }

    /**
     * A damaged node description (a GPU index given twice): a bad file, README's REFUSED (2). {@code gpusched env}
     * exits 2; {@code YarnContainerGpus} with the same node description exits 4 (NODE_UNREADABLE), because its
     * catch-all {@code catch (GpuException e)} maps every other gpusched error (GpuConfigException included) to
     * EXIT_UNREADABLE.
     */
    @Test
    void aBadNodeDescriptionExitsWithTheSameCodeFromGpuschedEnvAndFromYarnContainerGpus() throws Exception {
        Path node = dir.resolve("twice.yaml");
        Files.writeString(node, "node: twice\n"
                + "defaults: {vendor: NVIDIA, name: NVIDIA A10, memory: 24GiB}\n"
                + "devices:\n"
                + "  - {index: 0, pci_bus_id: \"00000000:17:00.0\"}\n"
                + "  - {index: 0, pci_bus_id: \"00000000:18:00.0\"}\n");
        Path state = dir.resolve("state");
        Result env = gpusched("--simulate", node.toString(), "--state-dir", state.toString(), "env", "--container",
                CONTAINER);
        Result yarn = yarnEntryPoint("--inventory", "simulated:" + node, "--state-dir", state.toString(), CONTAINER);
        assertThat(env.exit()).as("gpusched env: " + env.err()).isEqualTo(2);
        assertThat(yarn.exit()).as("YarnContainerGpus for the same bad node file (gpusched env exits "
                + env.exit() + "): " + yarn.err()).isEqualTo(env.exit());
    }

    /**
     * {@code gpusched run} whose command cannot be started: there is no command's code to pass on (README: "gpusched
     * run exits with its command's code", 128+N for a signal), so it is the command as given that cannot be done.
     * It exits 127, a code in no row of README's table and documented nowhere in it.
     */
    @Test
    void aRunWhoseCommandCannotStartExitsWithACodeOfTheTable() throws Exception {
        TreeSet<Integer> table = readmeCodes();
        assertThat(table).as("README's table").contains(0, 1, 2, 3, 4);
        Result r = gpusched("--simulate", "dgx1-v100", "--state-dir", dir.resolve("state").toString(), "run",
                "--no-isolation", "--gpu=1", "--", dir.resolve("no-such-command").toString());
        assertThat(r.err()).as("the run's error line").contains("cannot start");
        assertThat(table).as("README's exit code table should have the code of `run` whose command cannot start ("
                + r.err().strip() + ")").contains(r.exit());
    }

    /**
     * The Kubernetes device plug-in (the DaemonSet's entry point) given a device-plug-in directory that is a regular
     * file: a bad setting, README's REFUSED (2). It exits 1 (FAILED, "an unexpected error") with the line
     * "gpusched: <the path>" and nothing else: Files.createDirectories' FileAlreadyExistsException
     * (KubeletDevicePlugin.java:110) is an IOException, which ExitCode.of maps to FAILED.
     */
    @Test
    void aDevicePluginDirectoryThatIsAFileIsRefusedWithTheBadSettingCode() throws Exception {
        Path file = Files.writeString(dir.resolve("not-a-directory"), "x");
        Result r = gpusched("--simulate", "dgx1-v100", "--state-dir", dir.resolve("state").toString(),
                "k8s-device-plugin", "--device-plugin-dir", file.toString());
        assertThat(r.exit()).as("k8s-device-plugin --device-plugin-dir <a file>: " + r.err()).isEqualTo(2);
        assertThat(r.err()).as("the error line").contains("not a directory");
    }
}
