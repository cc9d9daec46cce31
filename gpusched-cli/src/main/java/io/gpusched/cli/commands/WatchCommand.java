package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.WatchView;
import io.gpusched.client.NodeClient;
import io.gpusched.core.DeviceView;
import io.gpusched.core.internal.Durations;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched watch}. */
@Command(name = "watch", description = "A live view of the GPUs; Ctrl-C to stop.")
public final class WatchCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Option(names = "--interval", defaultValue = "1s", description = "refresh interval of a local ledger (500ms, 2s,"
            + " ...); through the node service, a frame comes each time the service samples the GPUs")
    String interval;

    @Option(names = "--count", defaultValue = "0", description = "frames to draw; 0: until Ctrl-C")
    int count;

    @Option(names = "--no-ansi", description = "plain output, one frame after another (for pipes)")
    boolean noAnsi;

    @Override
    public Integer call() throws InterruptedException {
        Duration every = Durations.parse(interval);
        boolean ansi = !noAnsi && System.console() != null;
        try (NodeClient n = root.client()) {
            String backend = n.node().backend();
            Thread restore = new Thread(() -> root.out().print(ansi ? "\u001b[0m\n" : ""));
            Runtime.getRuntime().addShutdownHook(restore);
            Map<Integer, String> previous = new HashMap<>();
            int[] frame = {0};
            n.watch(every, snapshot -> {
                root.out().print(WatchView.render("gpusched watch - " + backend + " - every " + interval
                        + " (Ctrl-C to stop)", snapshot.devices(), previous, ansi));
                root.out().flush();
                previous.clear();
                for (DeviceView d : snapshot.devices()) {
                    previous.put(d.index(), WatchView.health(d));
                }
                frame[0]++;
                return count == 0 || frame[0] < count;
            });
            try {
                Runtime.getRuntime().removeShutdownHook(restore);
            } catch (IllegalStateException shuttingDown) {
                // Ctrl-C arrived as the last frame was drawn: the hook restores the terminal
            }
        }
        return 0;
    }
}
