/*
 * Entry point of the Java-client driver (see integration-tests/README.md, "The driver
 * protocol"): parses `<command> --bootstrap HOST:PORT [--client-config FILE] [options]`, runs the command with the
 * official Apache Kafka Java client and prints JSON on stdout.
 * Exit codes: 0 success, 1 any client error (its class and message go to stderr as one JSON
 * line), 2 usage error, 3 unsupported command. Client logs go to stderr (slf4j-simple, WARN
 * unless BROOK_DRIVER_LOG names another level), never to stdout.
 */
package dev.brook.driver;

import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

public final class Main {
    private Main() {}

    public static void main(String[] argv) {
        configureLogging();
        int code;
        try {
            code = run(Args.parse(argv));
        } catch (Args.UsageException e) {
            System.err.println(e.getMessage());
            code = 2;
        } catch (Exception e) {
            reportError(e);
            code = 1;
        }
        System.exit(code);
    }

    private static int run(Args args) throws Exception {
        String bootstrap = args.required("bootstrap");
        Properties base = new Properties();
        base.put("bootstrap.servers", bootstrap);
        base.put("client.id", "brook-driver-java");
        // --client-config FILE: security and other client settings (Java properties, Kafka's
        // own client names), applied to every client the command creates.
        Optional<String> clientConfig = args.get("client-config");
        if (clientConfig.isPresent()) {
            try (Reader reader = Files.newBufferedReader(Path.of(clientConfig.get()))) {
                base.load(reader);
            }
        }
        switch (args.command) {
            case "produce":
                return ProduceCommand.run(base, args);
            case "consume":
                return ConsumeCommand.run(base, args);
            case "group-consume":
                return GroupConsumeCommand.run(base, args);
            case "group-members":
                return GroupMembersCommand.run(base, args);
            case "create-topics-loop":
                return CreateTopicsLoopCommand.run(base, args);
            case "produce-stream":
                return ProduceStreamCommand.run(base, args);
            case "txn-shell":
                return TxnShellCommand.run(base, args);
            case "streams-wordcount":
                return StreamsWordCountCommand.run(base, args);
            case "metadata":
            case "create-topic":
            case "delete-topic":
            case "create-partitions":
            case "describe-topic":
            case "list-topics":
            case "describe-configs":
            case "alter-configs":
            case "offsets":
                return AdminCommands.run(base, args);
            default:
                Json.println(Json.object().put("unsupported", "unknown command '" + args.command + "'"));
                return 3;
        }
    }

    /** Prints the root cause of a client failure as one JSON line on stderr. */
    private static void reportError(Throwable e) {
        Throwable cause = e;
        while (cause instanceof ExecutionException && cause.getCause() != null) {
            cause = cause.getCause();
        }
        String line;
        try {
            line = Json.MAPPER.writeValueAsString(Json.object()
                    .put("error", cause.getClass().getSimpleName())
                    .put("message", String.valueOf(cause.getMessage())));
        } catch (Exception ignored) {
            line = cause.toString();
        }
        System.err.println(line);
    }

    /** slf4j-simple reads its settings once, at its first use: set them before any client class. */
    private static void configureLogging() {
        String level = System.getenv("BROOK_DRIVER_LOG");
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", level == null ? "warn" : level);
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
    }
}
