package io.gpusched.examples;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * README's "Examples": every example has a shell line, and each line, run by bash from the repository's directory as
 * a user pastes it (after the packaging README gives), ends with exit 0 and prints what the example promises. Runs
 * after {@code package} (failsafe), when {@code examples/target/gpusched-examples.jar} and its {@code lib/} exist.
 */
class ExamplesFromTheShellIT {
    private static final Pattern LINE = Pattern.compile(
            "^ {2}`(java -cp examples/target/gpusched-examples\\.jar io\\.gpusched\\.examples\\.(\\w+))`$");

    /** What each example prints, as {@link ExamplesTest} checks it in process. */
    private static final Map<String, String> PROMISES = Map.of("Quickstart", "got [GPU-", "DiscoverNode",
            "provider nvml", "TopologyAwareAllocation", "topology: 4 GPUs -> [4, 5, 6, 7], 9 NVLinks among them",
            "SharedInference", "MPS memory 0=6144M", "CudaEnvironmentExample", "\"variables\"", "WorkflowPlan",
            "stage 2 evaluate", "CustomStrategy", "high-first gives [7, 6]", "Demo", "Released;", "IsolateJob",
            "");

    @Test
    void everyExampleRunsFromTheShellAsReadmeSays() throws Exception {
        Path repo = Path.of("").toAbsolutePath().getParent();
        String readme = Files.readString(repo.resolve("README.md"), StandardCharsets.UTF_8);
        String section = readme.substring(readme.indexOf("## Examples"), readme.indexOf("## Behaviour worth knowing"));
        Map<String, String> commands = new LinkedHashMap<>();
        for (String line : section.lines().toList()) {
            Matcher m = LINE.matcher(line);
            if (m.matches()) {
                commands.put(m.group(2), m.group(1));
            }
        }
        try (Stream<Path> sources = Files.list(repo.resolve("examples/src/main/java/io/gpusched/examples"))) {
            assertThat(commands.keySet()).as("a shell line for every example")
                    .containsExactlyInAnyOrderElementsOf(sources.map(p -> p.getFileName().toString())
                            .filter(n -> n.endsWith(".java") && !n.equals("package-info.java"))
                            .map(n -> n.substring(0, n.length() - 5)).toList());
        }
        for (Map.Entry<String, String> e : commands.entrySet()) {
            Process p = new ProcessBuilder("bash", "-c", e.getValue()).directory(repo.toFile())
                    .redirectErrorStream(true).start();
            p.getOutputStream().close();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(p.waitFor(120, TimeUnit.SECONDS)).as(e.getKey()).isTrue();
            assertThat(p.exitValue()).as("%s: %s%n%s", e.getKey(), e.getValue(), out).isZero();
            String promise = PROMISES.get(e.getKey());
            if (e.getKey().equals("IsolateJob")) { // fenced as root on cgroups, else it says why not
                assertThat(out).containsAnyOf("child exited with 0", "isolation unavailable here: ");
            } else {
                assertThat(out).as(e.getKey()).contains(promise);
            }
        }
    }
}
