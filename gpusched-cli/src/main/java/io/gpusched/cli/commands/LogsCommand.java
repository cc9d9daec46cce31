package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.client.NodeClient;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched logs ID [--follow]}: a detached job's output. */
@Command(name = "logs", description = "Print a detached job's output (yours, or any job for an admin).")
public final class LogsCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Parameters(paramLabel = "ID", description = "job id")
    String id;

    @Option(names = {"--follow", "-f"}, description = "keep printing as the job writes, until it ends")
    boolean follow;

    @Override
    public Integer call() throws InterruptedException {
        try (NodeClient n = root.client()) {
            n.logs(id, follow, root.out());
        }
        return 0;
    }
}
