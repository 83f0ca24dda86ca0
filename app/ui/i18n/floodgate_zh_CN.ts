<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="zh_CN">
<context>
    <name>ChatView</name>
    <message>
        <source>You</source>
        <translation>你</translation>
    </message>
    <message>
        <source>code</source>
        <translation>代码</translation>
    </message>
    <message>
        <source>Copy</source>
        <translation>复制</translation>
    </message>
    <message>
        <source>Copy the code</source>
        <translation>复制代码</translation>
    </message>
    <message>
        <source>Copy the whole message (Markdown as the model wrote it)</source>
        <translation>复制整条消息（模型写出的 Markdown 原文）</translation>
    </message>
    <message>
        <source>Edit</source>
        <translation>编辑</translation>
    </message>
    <message>
        <source>Edit this message and send it again</source>
        <translation>编辑这条消息并重新发送</translation>
    </message>
    <message>
        <source>Regenerate</source>
        <translation>重新生成</translation>
    </message>
    <message>
        <source>Ask for this reply again; this one stays as a variant</source>
        <translation>重新生成这条回复；当前这条会作为另一个版本保留</translation>
    </message>
    <message>
        <source>Previous variant</source>
        <translation>上一个版本</translation>
    </message>
    <message>
        <source>Next variant</source>
        <translation>下一个版本</translation>
    </message>
    <message>
        <source>Thinking…</source>
        <translation>思考中…</translation>
    </message>
    <message>
        <source>Thoughts</source>
        <translation>思考过程</translation>
    </message>
    <message>
        <source>Thought for {seconds} s</source>
        <translation>思考了 {seconds} 秒</translation>
    </message>
</context>
<context>
    <name>Composer</name>
    <message>
        <source>Message the model… (Enter sends, Shift+Enter for a new line)</source>
        <translation>给模型发消息…（Enter 发送，Shift+Enter 换行）</translation>
    </message>
</context>
<context>
    <name>DiagnosticsPanel</name>
    <message>
        <source>Tokens/s</source>
        <translation>词元/秒</translation>
    </message>
    <message>
        <source>First token</source>
        <translation>首个词元</translation>
    </message>
    <message>
        <source>Queue (now / max / bound)</source>
        <translation>队列（当前 / 最大 / 上限）</translation>
    </message>
    <message>
        <source>Backpressure waits</source>
        <translation>背压等待</translation>
    </message>
    <message>
        <source>Frame cost (last / p95)</source>
        <translation>每帧耗时（最近 / p95）</translation>
    </message>
    <message>
        <source>Loop lag (p99 / max)</source>
        <translation>事件循环延迟（p99 / 最大）</translation>
    </message>
    <message>
        <source>Last stop latency</source>
        <translation>上次停止延迟</translation>
    </message>
</context>
<context>
    <name>Floodgate</name>
    <message>
        <source>The model failed: {reason}</source>
        <translation>模型出错：{reason}</translation>
    </message>
    <message>
        <source>The conversation is too long for this model&apos;s context of {n_ctx} tokens ({reason}). Start a new chat or shorten the prompt.</source>
        <translation>对话太长，超出了该模型 {n_ctx} 个词元的上下文（{reason}）。请开始新的对话，或缩短提示。</translation>
    </message>
    <message>
        <source>{name} could not be loaded: the file may be truncated, damaged, or made for a newer llama.cpp. ({reason})</source>
        <translation>无法加载 {name}：文件可能不完整、已损坏，或需要更新版本的 llama.cpp。（{reason}）</translation>
    </message>
    <message>
        <source>The model file {path} does not exist.</source>
        <translation>模型文件 {path} 不存在。</translation>
    </message>
    <message>
        <source>{path} is a folder, not a model file. Choose a .gguf file.</source>
        <translation>{path} 是一个文件夹，不是模型文件。请选择 .gguf 文件。</translation>
    </message>
    <message>
        <source>The model file {path} cannot be read: {reason}.</source>
        <translation>无法读取模型文件 {path}：{reason}。</translation>
    </message>
    <message>
        <source>{name} is not a GGUF model file. Floodgate opens llama.cpp models in the GGUF format (.gguf).</source>
        <translation>{name} 不是 GGUF 模型文件。Floodgate 打开的是 GGUF 格式（.gguf）的 llama.cpp 模型。</translation>
    </message>
    <message>
        <source>Loading {name}…</source>
        <translation>正在加载 {name}…</translation>
    </message>
    <message>
        <source>The model is still loading; your prompt will be answered next.</source>
        <translation>模型仍在加载；加载完成后会立即回答你的提问。</translation>
    </message>
    <message>
        <source>Connecting to {url}…</source>
        <translation>正在连接 {url}…</translation>
    </message>
    <message>
        <source>The server at {url} does not offer “{model}”; it has: {offered}.</source>
        <translation>{url} 上的服务器没有提供“{model}”；它提供的是：{offered}。</translation>
    </message>
    <message>
        <source>Stopped.</source>
        <translation>已停止。</translation>
    </message>
    <message>
        <source>The reply reached the limit of {n} tokens.</source>
        <translation>回复已达到 {n} 个词元的上限。</translation>
    </message>
    <message>
        <source>The {n} oldest messages were left out of what the model saw: the conversation no longer fits its context of {n_ctx} tokens.</source>
        <translation>最早的 {n} 条消息未发送给模型：对话已超出其 {n_ctx} 个词元的上下文。</translation>
    </message>
    <message>
        <source>Interrupted: Floodgate closed before this reply ended.</source>
        <translation>已中断：Floodgate 在这条回复结束前关闭了。</translation>
    </message>
    <message>
        <source>{name} could not be imported: {reason}</source>
        <translation>无法导入 {name}：{reason}</translation>
    </message>
    <message>
        <source>{name} has no chat template; Floodgate uses the generic &apos;{format}&apos; format, so its replies may be poor.</source>
        <translation>{name} 没有对话模板；Floodgate 使用通用的“{format}”格式，回复质量可能较差。</translation>
    </message>
    <message>
        <source>Answering…</source>
        <translation>正在回答…</translation>
    </message>
    <message>
        <source>Answering with {name}…</source>
        <translation>{name} 正在回答…</translation>
    </message>
    <message>
        <source>No model is loaded.</source>
        <translation>尚未加载模型。</translation>
    </message>
    <message>
        <source>{name} is ready.</source>
        <translation>{name} 已就绪。</translation>
    </message>
    <message>
        <source>No model is loaded. Open a model with File &gt; Open model…, then send again.</source>
        <translation>尚未加载模型。请通过“文件 &gt; 打开模型…”打开一个模型，然后再次发送。</translation>
    </message>
    <message>
        <source>The model {name} could not be opened: {reason}</source>
        <translation>无法打开模型 {name}：{reason}</translation>
    </message>
    <message>
        <source>Your message is about {tokens} tokens long, more than the {budget} tokens this model&apos;s context of {n_ctx} leaves for it. Shorten it, or open the model with a larger context (--ctx).</source>
        <translation>你的消息约有 {tokens} 个词元，超过了该模型 {n_ctx} 个词元的上下文所能容纳的 {budget} 个。请缩短消息，或以更大的上下文（--ctx）打开模型。</translation>
    </message>
    <message>
        <source>Generation failed unexpectedly: {reason}</source>
        <translation>生成意外失败：{reason}</translation>
    </message>
    <message>
        <source>Saving the conversation failed ({reason}). It stays on screen; export it to keep it.</source>
        <translation>保存对话失败（{reason}）。对话仍显示在屏幕上；如需保留，请导出。</translation>
    </message>
    <message>
        <source>The chat history in {path} is damaged or is not a Floodgate database. Floodgate keeps working without saving, and the file was left as it was.</source>
        <translation>{path} 中的聊天记录已损坏，或不是 Floodgate 的数据库。Floodgate 会继续运行但不保存，该文件保持原样。</translation>
    </message>
    <message>
        <source>The chat history in {path} is in use by another program (is Floodgate already open?). Floodgate keeps working without saving, and the file was left as it was.</source>
        <translation>{path} 中的聊天记录正被另一个程序使用（Floodgate 是否已经打开？）。Floodgate 会继续运行但不保存，该文件保持原样。</translation>
    </message>
    <message>
        <source>The chat history in {path} cannot be written to; its conversations are shown but nothing new is saved. The file was left as it was.</source>
        <translation>{path} 中的聊天记录无法写入；其中的对话可以查看，但新内容不会保存。该文件保持原样。</translation>
    </message>
    <message>
        <source>The chat history in {path} cannot be opened ({reason}). Floodgate keeps working without saving, and the file was left as it was.</source>
        <translation>无法打开 {path} 中的聊天记录（{reason}）。Floodgate 会继续运行但不保存，该文件保持原样。</translation>
    </message>
    <message>
        <source>System prompt for new chats</source>
        <translation>新对话的系统提示</translation>
    </message>
    <message>
        <source>Temperature</source>
        <translation>温度</translation>
    </message>
    <message>
        <source>Top p</source>
        <translation>Top p</translation>
    </message>
    <message>
        <source>Top k (0: off)</source>
        <translation>Top k（0 表示关闭）</translation>
    </message>
    <message>
        <source>Min p</source>
        <translation>Min p</translation>
    </message>
    <message>
        <source>Repeat penalty</source>
        <translation>重复惩罚</translation>
    </message>
    <message>
        <source>Max tokens per reply</source>
        <translation>每条回复的最大词元数</translation>
    </message>
    <message>
        <source>Seed (empty: random)</source>
        <translation>随机种子（留空表示随机）</translation>
    </message>
    <message>
        <source>Context size (tokens)</source>
        <translation>上下文大小（词元）</translation>
    </message>
    <message>
        <source>Threads</source>
        <translation>线程数</translation>
    </message>
    <message>
        <source>Batch size</source>
        <translation>批大小</translation>
    </message>
    <message>
        <source>Queue bound (pieces)</source>
        <translation>队列上限（片段数）</translation>
    </message>
    <message>
        <source>Enter a number from {minimum} to {maximum}.</source>
        <translation>请输入 {minimum} 到 {maximum} 之间的数。</translation>
    </message>
    <message>
        <source>Enter a whole number from {minimum} to {maximum}.</source>
        <translation>请输入 {minimum} 到 {maximum} 之间的整数。</translation>
    </message>
    <message>
        <source>Enter a whole number from {minimum} to {maximum}, or nothing for a random seed.</source>
        <translation>请输入 {minimum} 到 {maximum} 之间的整数，或留空以使用随机种子。</translation>
    </message>
    <message>
        <source>The header of {name} cannot be read: {reason}</source>
        <translation>无法读取 {name} 的文件头：{reason}</translation>
    </message>
    <message>
        <source>The server at {url} refused the API key (HTTP {status}).</source>
        <translation>{url} 上的服务器拒绝了该 API 密钥（HTTP {status}）。</translation>
    </message>
    <message>
        <source>The server at {url} does not know the model “{model}” or this API (HTTP {status}).</source>
        <translation>{url} 上的服务器不认识模型“{model}”或不支持此 API（HTTP {status}）。</translation>
    </message>
    <message>
        <source>The server at {url} answered with an error (HTTP {status}): {detail}</source>
        <translation>{url} 上的服务器返回了错误（HTTP {status}）：{detail}</translation>
    </message>
    <message>
        <source>The server at {url} cannot be reached. Is it running? ({reason})</source>
        <translation>无法连接 {url} 上的服务器。它在运行吗？（{reason}）</translation>
    </message>
    <message>
        <source>The server at {url} stopped answering for {seconds} seconds.</source>
        <translation>{url} 上的服务器已有 {seconds} 秒没有响应。</translation>
    </message>
    <message>
        <source>The connection to {url} broke in the middle of the reply ({reason}).</source>
        <translation>与 {url} 的连接在回复中途断开了（{reason}）。</translation>
    </message>
    <message>
        <source>The server at {url} sent something that is not a chat stream: {what}</source>
        <translation>{url} 上的服务器发来的内容不是对话流：{what}</translation>
    </message>
    <message>
        <source>There is no system keyring, so the API key is kept only until Floodgate closes.</source>
        <translation>没有系统密钥环，因此 API 密钥只保留到 Floodgate 关闭为止。</translation>
    </message>
</context>
<context>
    <name>MainWindow</name>
    <message>
        <source>&amp;File</source>
        <translation>文件(&amp;F)</translation>
    </message>
    <message>
        <source>&amp;Open model…</source>
        <translation>打开模型(&amp;O)…</translation>
    </message>
    <message>
        <source>&amp;Settings…</source>
        <translation>设置(&amp;S)…</translation>
    </message>
    <message>
        <source>&amp;Models…</source>
        <translation>模型(&amp;M)…</translation>
    </message>
    <message>
        <source>&amp;Connect to a server…</source>
        <translation>连接到服务器(&amp;C)…</translation>
    </message>
    <message>
        <source>&amp;Quit</source>
        <translation>退出(&amp;Q)</translation>
    </message>
    <message>
        <source>&amp;View</source>
        <translation>视图(&amp;V)</translation>
    </message>
    <message>
        <source>&amp;Chat</source>
        <translation>对话(&amp;C)</translation>
    </message>
    <message>
        <source>&amp;New chat</source>
        <translation>新对话(&amp;N)</translation>
    </message>
    <message>
        <source>&amp;Regenerate the last reply</source>
        <translation>重新生成最后一条回复(&amp;R)</translation>
    </message>
    <message>
        <source>&amp;System prompt…</source>
        <translation>系统提示(&amp;S)…</translation>
    </message>
    <message>
        <source>Sampling for this &amp;conversation…</source>
        <translation>本对话的采样设置(&amp;C)…</translation>
    </message>
    <message>
        <source>Export as &amp;Markdown…</source>
        <translation>导出为 &amp;Markdown…</translation>
    </message>
    <message>
        <source>Export as &amp;JSON…</source>
        <translation>导出为 &amp;JSON…</translation>
    </message>
    <message>
        <source>&amp;Import a conversation…</source>
        <translation>导入对话(&amp;I)…</translation>
    </message>
    <message>
        <source>Conversations</source>
        <translation>对话列表</translation>
    </message>
    <message>
        <source>Undo delete</source>
        <translation>撤销删除</translation>
    </message>
    <message>
        <source>Editing a message: Enter sends it as a new version, Esc cancels.</source>
        <translation>正在编辑消息：按 Enter 作为新版本发送，按 Esc 取消。</translation>
    </message>
    <message>
        <source>Flow diagnostics</source>
        <translation>数据流诊断</translation>
    </message>
    <message>
        <source>&amp;Theme</source>
        <translation>主题(&amp;T)</translation>
    </message>
    <message>
        <source>Follow the system</source>
        <translation>跟随系统</translation>
    </message>
    <message>
        <source>Light</source>
        <translation>浅色</translation>
    </message>
    <message>
        <source>Dark</source>
        <translation>深色</translation>
    </message>
    <message>
        <source>&amp;Language</source>
        <translation>语言(&amp;L)</translation>
    </message>
    <message>
        <source>Send</source>
        <translation>发送</translation>
    </message>
    <message>
        <source>Stop</source>
        <translation>停止</translation>
    </message>
    <message>
        <source>Stopping…</source>
        <translation>正在停止…</translation>
    </message>
    <message>
        <source>Type a message first.</source>
        <translation>请先输入消息。</translation>
    </message>
    <message>
        <source>Open model</source>
        <translation>打开模型</translation>
    </message>
    <message>
        <source>GGUF models (*.gguf);;All files (*)</source>
        <translation>GGUF 模型 (*.gguf);;所有文件 (*)</translation>
    </message>
    <message>
        <source>System prompt</source>
        <translation>系统提示</translation>
    </message>
    <message>
        <source>Instructions the model gets before the conversation (empty: none):</source>
        <translation>在对话之前交给模型的指示（留空表示无）：</translation>
    </message>
    <message>
        <source>Sampling for this conversation</source>
        <translation>本对话的采样设置</translation>
    </message>
    <message>
        <source>Export conversation</source>
        <translation>导出对话</translation>
    </message>
    <message>
        <source>JSON (*.json)</source>
        <translation>JSON (*.json)</translation>
    </message>
    <message>
        <source>Markdown (*.md)</source>
        <translation>Markdown (*.md)</translation>
    </message>
    <message>
        <source>Import a conversation</source>
        <translation>导入对话</translation>
    </message>
    <message>
        <source>{rate} tok/s</source>
        <translation>{rate} 词元/秒</translation>
    </message>
    <message>
        <source>queue {depth}/{bound}</source>
        <translation>队列 {depth}/{bound}</translation>
    </message>
</context>
<context>
    <name>ModelLibrary</name>
    <message>
        <source>Models</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>Name</source>
        <translation>名称</translation>
    </message>
    <message>
        <source>Architecture</source>
        <translation>架构</translation>
    </message>
    <message>
        <source>Parameters</source>
        <translation>参数量</translation>
    </message>
    <message>
        <source>Quantization</source>
        <translation>量化</translation>
    </message>
    <message>
        <source>Context</source>
        <translation>上下文</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>大小</translation>
    </message>
    <message>
        <source>Chat template</source>
        <translation>对话模板</translation>
    </message>
    <message>
        <source>Open</source>
        <translation>打开</translation>
    </message>
    <message>
        <source>Add a file…</source>
        <translation>添加文件…</translation>
    </message>
    <message>
        <source>Close</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>in use</source>
        <translation>使用中</translation>
    </message>
    <message>
        <source>yes</source>
        <translation>有</translation>
    </message>
    <message>
        <source>no (generic format)</source>
        <translation>无（使用通用格式）</translation>
    </message>
</context>
<context>
    <name>ServerDialog</name>
    <message>
        <source>Connect to a server</source>
        <translation>连接到服务器</translation>
    </message>
    <message>
        <source>none</source>
        <translation>无</translation>
    </message>
    <message>
        <source>List models</source>
        <translation>列出模型</translation>
    </message>
    <message>
        <source>Address (OpenAI-compatible API)</source>
        <translation>地址（兼容 OpenAI 的 API）</translation>
    </message>
    <message>
        <source>API key</source>
        <translation>API 密钥</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>llama-server, vLLM, Ollama and LM Studio all serve this API. The key goes to the system keyring when there is one, never to Floodgate&apos;s files or logs.</source>
        <translation>llama-server、vLLM、Ollama 和 LM Studio 都提供这种 API。如有系统密钥环，密钥会存入其中，绝不会写入 Floodgate 的文件或日志。</translation>
    </message>
    <message>
        <source>Connect</source>
        <translation>连接</translation>
    </message>
    <message>
        <source>Enter the server&apos;s address.</source>
        <translation>请输入服务器地址。</translation>
    </message>
</context>
<context>
    <name>SettingsDialog</name>
    <message>
        <source>Settings</source>
        <translation>设置</translation>
    </message>
    <message>
        <source>Context size, threads and batch size apply when the model is opened again.</source>
        <translation>上下文大小、线程数和批大小会在重新打开模型时生效。</translation>
    </message>
</context>
<context>
    <name>Sidebar</name>
    <message>
        <source>Search conversations</source>
        <translation>搜索对话</translation>
    </message>
    <message>
        <source>New chat</source>
        <translation>新对话</translation>
    </message>
    <message>
        <source>Delete</source>
        <translation>删除</translation>
    </message>
    <message>
        <source>Rename</source>
        <translation>重命名</translation>
    </message>
    <message>
        <source>Untitled</source>
        <translation>未命名</translation>
    </message>
</context>
</TS>
