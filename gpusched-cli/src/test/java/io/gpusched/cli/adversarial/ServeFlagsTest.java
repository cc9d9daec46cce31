package io.gpusched.cli.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpusched serve} flags that bound the console: an --interval under 1ms or over 5m and a bad --allowed-host stop the
 * start with an error naming the flag; an --interval under 100ms is served with a note saying the history keeps one
 * point per 100ms. The serve runs in-process and is made to fail at bind (its port is taken), so nothing keeps running.
 */
@Tag("adversarial")
class ServeFlagsTest {
    @Test
    void intervalUnderOneMillisecondAndBadAllowedHostsAreRefused(@TempDir Path state) {
        for (List<String> args : List.of(List.of("--interval", "0ms"), List.of("--interval", "-1ms"),
                List.of("--interval", "11m"), List.of("--allowed-host", "http://evil"),
                List.of("--allowed-host", "node:9400"))) {
            List<String> all = new java.util.ArrayList<>(List.of("--simulate", "pcie-4xa10", "serve", "--listen",
                    "127.0.0.1:0"));
            all.addAll(args);
            Cli.Result r = Cli.run(state, all.toArray(String[]::new));
            assertThat(r.exit()).as("%s: %s", args, r.err()).isNotZero();
            assertThat(r.err()).as("%s", args).contains(args.get(0));
            assertThat(r.out()).as("%s", args).doesNotContain("gpusched console on");
        }
    }

    @Test
    void intervalUnderOneHundredMillisecondsSaysTheHistoryIsThinned(@TempDir Path state) throws Exception {
        try (ServerSocket taken = new ServerSocket()) {
            taken.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            Cli.Result r = Cli.run(state, "--simulate", "pcie-4xa10", "serve", "--interval", "1ms", "--listen",
                    "127.0.0.1:" + taken.getLocalPort());
            assertThat(r.exit()).as(r.err()).isNotZero(); // the port is taken: the start fails after the note
            assertThat(r.err()).contains("note: --interval 1ms is under 100ms")
                    .contains("one point per 100ms").contains("cannot listen");
        }
    }
}
