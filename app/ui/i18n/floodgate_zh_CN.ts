<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="zh_CN">
<context>
    <name>ApiServerDialog</name>
    <message>
        <source>Local API server</source>
        <translation>本地 API 服务器</translation>
    </message>
    <message>
        <source>Serve the open model to other programs</source>
        <translation>向其他程序提供已打开的模型</translation>
    </message>
    <message>
        <source>none (only this machine may connect)</source>
        <translation>无（只有本机可以连接）</translation>
    </message>
    <message>
        <source>one per line; none: no browser page may call it</source>
        <translation>每行一个；留空：任何浏览器页面都不能调用</translation>
    </message>
    <message>
        <source>Address</source>
        <translation>地址</translation>
    </message>
    <message>
        <source>Port</source>
        <translation>端口</translation>
    </message>
    <message>
        <source>API key</source>
        <translation>API 密钥</translation>
    </message>
    <message>
        <source>Web origins (CORS)</source>
        <translation>网页来源（CORS）</translation>
    </message>
    <message>
        <source>Enter an address, such as 127.0.0.1.</source>
        <translation>请输入地址，例如 127.0.0.1。</translation>
    </message>
</context>
<context>
    <name>ApiServerFace</name>
    <message>
        <source>Local API server…</source>
        <translation>本地 API 服务器…</translation>
    </message>
    <message>
        <source>Server requests</source>
        <translation>服务器请求</translation>
    </message>
    <message>
        <source>Copy the API server&apos;s address</source>
        <translation>复制 API 服务器的地址</translation>
    </message>
    <message>
        <source>Copied {address}</source>
        <translation>已复制 {address}</translation>
    </message>
</context>
<context>
    <name>ApiServerPanel</name>
    <message>
        <source>Time</source>
        <translation>时间</translation>
    </message>
    <message>
        <source>Client</source>
        <translation>客户端</translation>
    </message>
    <message>
        <source>Endpoint</source>
        <translation>端点</translation>
    </message>
    <message>
        <source>Status</source>
        <translation>状态</translation>
    </message>
    <message>
        <source>Prompt (cached)</source>
        <translation>提示（已缓存）</translation>
    </message>
    <message>
        <source>Reply</source>
        <translation>回复</translation>
    </message>
    <message>
        <source>tok/s</source>
        <translation>词元/秒</translation>
    </message>
    <message>
        <source>Side by side</source>
        <translation>并行数</translation>
    </message>
    <message>
        <source>Duration</source>
        <translation>耗时</translation>
    </message>
    <message>
        <source>Replies the model decoded in the same step as this one, itself counted; once it ended, the most there were.</source>
        <translation>与此回复在同一步中解码的回复数（含其自身）；结束后显示最多时的数量。</translation>
    </message>
    <message>
        <source>Places: how many replies the model can write at once (Settings, Compute, Parallel replies), the window&apos;s and the API&apos;s. A paused reply waits out of the batch until its reader catches up; the others go on.</source>
        <translation>位置：模型可同时撰写的回复数（设置 › 计算 › 并行回复），包括本窗口的和 API 的。已暂停的回复会离开批处理，等待其读取方跟上；其他回复继续进行。</translation>
    </message>
    <message>
        <source>Stop request</source>
        <translation>停止请求</translation>
    </message>
    <message>
        <source>Its client reads slower than the model writes: the reply waits, out of the batch, for it to catch up; the others go on.</source>
        <translation>其客户端读取的速度慢于模型撰写的速度：此回复离开批处理，等待客户端跟上；其他回复继续进行。</translation>
    </message>
</context>
<context>
    <name>AppDialogs</name>
    <message>
        <source>Choose the projector for {name}</source>
        <translation>为 {name} 选择投影器</translation>
    </message>
    <message>
        <source>Projectors (mmproj*.gguf);;GGUF files (*.gguf);;All files (*)</source>
        <translation>投影器 (mmproj*.gguf);;GGUF 文件 (*.gguf);;所有文件 (*)</translation>
    </message>
</context>
<context>
    <name>AttachmentChip</name>
    <message>
        <source>Remove this attachment</source>
        <translation>移除此附件</translation>
    </message>
    <message>
        <source>Remove {name}</source>
        <translation>移除 {name}</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Stop reading {name}</source>
        <translation>停止读取 {name}</translation>
    </message>
    <message>
        <source>Include the part that fits</source>
        <translation>只加入放得下的部分</translation>
    </message>
    <message>
        <source>Include the part of {name} that fits</source>
        <translation>只加入 {name} 放得下的部分</translation>
    </message>
    <message>
        <source>Reading {name}</source>
        <translation>正在读取 {name}</translation>
    </message>
</context>
<context>
    <name>AttachmentDialog</name>
    <message>
        <source>{tokens} tokens</source>
        <translation>{tokens} 个词元</translation>
    </message>
    <message>
        <source>Text of {name}</source>
        <translation>{name} 的文字</translation>
    </message>
    <message>
        <source>Cut to fit: only the first {kept} of {full} tokens were sent.</source>
        <translation>已截短：只发送了 {full} 个词元中的前 {kept} 个。</translation>
    </message>
</context>
<context>
    <name>AttachmentTray</name>
    <message>
        <source>Attachments</source>
        <translation>附件</translation>
    </message>
    <message>
        <source>{name} · measuring the part that fits…</source>
        <translation>{name} · 正在计算放得下的部分…</translation>
    </message>
    <message>
        <source>{name} · reading…</source>
        <translation>{name} · 正在读取…</translation>
    </message>
    <message>
        <source>Cut to fit: only the first {kept} of {full} tokens are included.</source>
        <translation>已截短：只包含 {full} 个词元中的前 {kept} 个。</translation>
    </message>
    <message>
        <source>{name} is {tokens} tokens, more than the {room} left in the context.</source>
        <translation>{name} 有 {tokens} 个词元，超过上下文剩余的 {room} 个。</translation>
    </message>
    <message>
        <source>There is no room left in the context for {name}: remove another attachment, or start a new conversation.</source>
        <translation>上下文已没有空间容纳 {name}：请移除其他附件，或开始新的对话。</translation>
    </message>
    <message>
        <source>about {seconds} s to read</source>
        <translation>读取约需 {seconds} 秒</translation>
    </message>
    <message>
        <source>about {minutes} min to read</source>
        <translation>读取约需 {minutes} 分钟</translation>
    </message>
    <message>
        <source>picture</source>
        <translation>图片</translation>
    </message>
    <message>
        <source>sound</source>
        <translation>声音</translation>
    </message>
    <message>
        <source>1 page</source>
        <translation>1 页</translation>
    </message>
    <message>
        <source>{pages} pages</source>
        <translation>{pages} 页</translation>
    </message>
    <message>
        <source>{tokens} tokens</source>
        <translation>{tokens} 个词元</translation>
    </message>
    <message>
        <source>{tokens}, {duration}</source>
        <translation>{tokens}，{duration}</translation>
    </message>
    <message>
        <source>{tokens} tokens in all</source>
        <translation>共 {tokens} 个词元</translation>
    </message>
    <message>
        <source>{tokens} tokens: more than the {room} left in the context. Remove an attachment or include part of it.</source>
        <translation>{tokens} 个词元：超过上下文剩余的 {room} 个。请移除一个附件，或只加入其中一部分。</translation>
    </message>
    <message>
        <source>Takes {tokens} of the {room} tokens left in the context</source>
        <translation>上下文剩余 {room} 个词元，已用 {tokens} 个</translation>
    </message>
    <message>
        <source>{total}, {duration}</source>
        <translation>{total}，{duration}</translation>
    </message>
</context>
<context>
    <name>ChatView</name>
    <message>
        <source>You</source>
        <translation>你</translation>
    </message>
    <message>
        <source>{speaker} replied: {text}</source>
        <translation>{speaker} 回复：{text}</translation>
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
        <source>Copy prompt</source>
        <translation>复制提问</translation>
    </message>
    <message>
        <source>Copy reply</source>
        <translation>复制回复</translation>
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
        <source>Edit prompt</source>
        <translation>编辑提问</translation>
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
        <source>Previous version</source>
        <translation>上一个版本</translation>
    </message>
    <message>
        <source>Next variant</source>
        <translation>下一个版本</translation>
    </message>
    <message>
        <source>Next version</source>
        <translation>下一个版本</translation>
    </message>
    <message>
        <source>Show less</source>
        <translation>收起</translation>
    </message>
    <message>
        <source>Show all</source>
        <translation>全部显示</translation>
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
    <message>
        <source>Conversation</source>
        <translation>对话</translation>
    </message>
</context>
<context>
    <name>Composer</name>
    <message>
        <source>Message</source>
        <translation>消息</translation>
    </message>
    <message>
        <source>Message the model… (Enter sends, Shift+Enter for a new line)</source>
        <translation>给模型发消息…（Enter 发送，Shift+Enter 换行）</translation>
    </message>
</context>
<context>
    <name>ConversationsDock</name>
    <message>
        <source>Conversations</source>
        <translation>对话列表</translation>
    </message>
    <message>
        <source>Undo delete</source>
        <translation>撤销删除</translation>
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
    <message>
        <source>Prompt processed</source>
        <translation>提示已处理</translation>
    </message>
    <message>
        <source>Prompt processing</source>
        <translation>提示处理中</translation>
    </message>
    <message>
        <source>Python per token</source>
        <translation>每词元 Python 耗时</translation>
    </message>
    <message>
        <source>Guessed ahead</source>
        <translation>预先猜测</translation>
    </message>
    <message>
        <source>Prompt cache</source>
        <translation>提示缓存</translation>
    </message>
    <message>
        <source>Threads</source>
        <translation>线程</translation>
    </message>
    <message>
        <source>Runs on</source>
        <translation>运行于</translation>
    </message>
    <message>
        <source>{where}; GPU memory: {used} of {total} in use</source>
        <translation>{where}；GPU 显存：已用 {used}，共 {total}</translation>
    </message>
    <message>
        <source>{done} / {total} tokens ({percent} %), {cached} cached</source>
        <translation>{done} / {total} 个词元（{percent}%），{cached} 个来自缓存</translation>
    </message>
    <message>
        <source>{rate} tokens/s, {seconds} s</source>
        <translation>{rate} 词元/秒，{seconds} 秒</translation>
    </message>
    <message>
        <source>{kept} of {guessed} tokens kept ({percent} %); {guessed_rate}/s guessed, {kept_rate}/s kept</source>
        <translation>猜测的 {guessed} 个词元中保留了 {kept} 个（{percent} %）；每秒猜测 {guessed_rate} 个，保留 {kept_rate} 个</translation>
    </message>
    <message>
        <source>{entries} entries, {megabytes} MB; {hits} hits, {misses} misses; {saved} s saved</source>
        <translation>{entries} 条，{megabytes} MB；命中 {hits} 次，未命中 {misses} 次；节省 {saved} 秒</translation>
    </message>
</context>
<context>
    <name>EmptyChat</name>
    <message>
        <source>Explain how a rainbow forms, in three sentences.</source>
        <translation>用三句话解释彩虹是怎么形成的。</translation>
    </message>
    <message>
        <source>Write a Python function that tells whether a word is a palindrome.</source>
        <translation>写一个 Python 函数，判断一个单词是不是回文。</translation>
    </message>
    <message>
        <source>Suggest five names for a small bakery.</source>
        <translation>为一家小面包店起五个名字。</translation>
    </message>
    <message>
        <source>What should I pack for a weekend of hiking?</source>
        <translation>周末去徒步，我该带些什么？</translation>
    </message>
    <message>
        <source>No model open</source>
        <translation>未打开模型</translation>
    </message>
    <message>
        <source>Ask anything, or start from an example:</source>
        <translation>随便问点什么，或者从一个示例开始：</translation>
    </message>
    <message>
        <source>Put this in the composer</source>
        <translation>把这段话放进输入框</translation>
    </message>
    <message>
        <source>Want another model? Search the Hugging Face Hub in the model library (File &gt; Models…), or open a GGUF file you have.</source>
        <translation>想换个模型？可在模型库（文件 &gt; 模型…）中搜索 Hugging Face Hub，或打开你已有的 GGUF 文件。</translation>
    </message>
    <message>
        <source>Find models on the Hub</source>
        <translation>在 Hub 上查找模型</translation>
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
        <source>The grammar could not be used: {reason}</source>
        <translation>无法使用该语法：{reason}</translation>
    </message>
    <message>
        <source>The draft model {draft} could not be opened, so {model} writes without it. ({reason})</source>
        <translation>无法打开草稿模型 {draft}，因此 {model} 将不借助它来生成。（{reason}）</translation>
    </message>
    <message>
        <source>The open model cannot see pictures. Open a model that can (one with a projector, an mmproj file beside it, such as SmolVLM or Gemma 3), or send the message without them.</source>
        <translation>当前打开的模型看不懂图片。请打开一个能看图的模型（旁边带有投影器，即 mmproj 文件，例如 SmolVLM 或 Gemma 3），或者不带图片发送消息。</translation>
    </message>
    <message>
        <source>The open model cannot hear sound. Open a model that can (one whose projector reads audio, such as Qwen2-Audio, Ultravox or Voxtral, with its mmproj file beside it), or send the message without it.</source>
        <translation>当前打开的模型听不到声音。请打开能听的模型（其投影器能读取音频，例如 Qwen2-Audio、Ultravox 或 Voxtral，mmproj 文件放在它旁边），或不带声音发送这条消息。</translation>
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
        <source>The model file {path} did not answer within {seconds} seconds. It may be on a network drive or a disk that stopped responding.</source>
        <translation>模型文件 {path} 在 {seconds} 秒内没有响应。它可能位于网络驱动器或已停止响应的磁盘上。</translation>
    </message>
    <message>
        <source>{path} is a named pipe, not a model file, so Floodgate does not open it. Choose a .gguf file.</source>
        <translation>{path} 是命名管道，不是模型文件，Floodgate 不会打开它。请选择 .gguf 文件。</translation>
    </message>
    <message>
        <source>{path} is a device, not a model file, so Floodgate does not open it. Choose a .gguf file.</source>
        <translation>{path} 是设备，不是模型文件，Floodgate 不会打开它。请选择 .gguf 文件。</translation>
    </message>
    <message>
        <source>{path} is a socket, not a model file, so Floodgate does not open it. Choose a .gguf file.</source>
        <translation>{path} 是套接字，不是模型文件，Floodgate 不会打开它。请选择 .gguf 文件。</translation>
    </message>
    <message>
        <source>{path} is not a regular file, so Floodgate does not open it. Choose a .gguf file.</source>
        <translation>{path} 不是普通文件，Floodgate 不会打开它。请选择 .gguf 文件。</translation>
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
        <source>The model ended its reply without writing anything.</source>
        <translation>模型没有写出任何内容就结束了回复。</translation>
    </message>
    <message>
        <source>Looking at the picture…</source>
        <translation>正在看图片…</translation>
    </message>
    <message>
        <source>Listening to the sound…</source>
        <translation>正在听声音…</translation>
    </message>
    <message>
        <source>Reading the conversation… {done} / {total} tokens</source>
        <translation>正在读取对话… {done} / {total} 个词元</translation>
    </message>
    <message>
        <source>Reading the conversation… {done} / {total} tokens, about {left} s left</source>
        <translation>正在读取对话… {done} / {total} 个词元，约剩 {left} 秒</translation>
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
        <source>{name} could not be written: {reason}</source>
        <translation>无法写入 {name}：{reason}</translation>
    </message>
    <message>
        <source>Some characters in {name} could not be kept and were replaced with �.</source>
        <translation>{name} 中有些字符无法保存，已替换为 �。</translation>
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
        <source>{name} is ready; {draft} writes ahead for it.</source>
        <translation>{name} 已就绪；{draft} 为它预先起草。</translation>
    </message>
    <message>
        <source>{name} is ready.</source>
        <translation>{name} 已就绪。</translation>
    </message>
    <message>
        <source>Measuring decode speed on this machine: thread count {n}…</source>
        <translation>正在测量本机的解码速度：{n} 个线程…</translation>
    </message>
    <message>
        <source>Measuring decode speed on this machine: thread count {n}, {rate} tokens/s…</source>
        <translation>正在测量本机的解码速度：{n} 个线程，每秒 {rate} 个词元…</translation>
    </message>
    <message>
        <source>measured now</source>
        <translation>刚刚测量</translation>
    </message>
    <message>
        <source>measured before on this machine</source>
        <translation>之前在本机测量</translation>
    </message>
    <message>
        <source>as set</source>
        <translation>按设置</translation>
    </message>
    <message>
        <source>every physical core, not measured</source>
        <translation>全部物理核心，未测量</translation>
    </message>
    <message>
        <source>Decode threads: {decode} ({how}; tokens/s at {rates}; while replies streamed at {streamed}); prompt threads: {prompt}</source>
        <translation>解码线程：{decode}（{how}；各线程数的每秒词元数：{rates}；回复流式显示时：{streamed}）；提示线程：{prompt}</translation>
    </message>
    <message>
        <source>Decode threads: {decode} ({how}); prompt threads: {prompt}</source>
        <translation>解码线程：{decode}（{how}）；提示线程：{prompt}</translation>
    </message>
    <message>
        <source>Decode threads: {decode} ({how}; tokens/s at {rates}); prompt threads: {prompt}</source>
        <translation>解码线程：{decode}（{how}；各线程数的每秒词元数：{rates}）；提示线程：{prompt}</translation>
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
        <source>There was no chat history in {path}, so Floodgate started a new one. Backups of the earlier one, the newest from {time}, are in {folder}.</source>
        <translation>{path} 中没有聊天记录，Floodgate 已新建一份。之前记录的备份（最新的来自 {time}）位于 {folder}。</translation>
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
        <source>Decode threads (0: measured on this machine)</source>
        <translation>解码线程（0：在本机测量）</translation>
    </message>
    <message>
        <source>Replies</source>
        <translation>回复</translation>
    </message>
    <message>
        <source>Compute</source>
        <translation>计算</translation>
    </message>
    <message>
        <source>Memory</source>
        <translation>内存</translation>
    </message>
    <message>
        <source>a random seed</source>
        <translation>随机种子</translation>
    </message>
    <message>
        <source>as many as fit</source>
        <translation>能放下多少就放多少</translation>
    </message>
    <message>
        <source>Auto</source>
        <translation>自动</translation>
    </message>
    <message>
        <source>Run models on</source>
        <translation>模型运行于</translation>
    </message>
    <message>
        <source>GPU layers (empty: as many as fit)</source>
        <translation>GPU 层数（留空：能放下多少就放多少）</translation>
    </message>
    <message>
        <source>GPU memory a model may use (MB, 0: what is free)</source>
        <translation>模型可用的 GPU 显存（MB，0：使用空闲的全部）</translation>
    </message>
    <message>
        <source>Parallel replies</source>
        <translation>并行回复</translation>
    </message>
    <message>
        <source>How many replies the model can write at once: the window&apos;s and those other programs ask for through the local API server. Each one keeps its own context in memory, so more uses more memory; writing several at once is a little slower for each but faster for all together. Auto chooses from the memory there is.</source>
        <translation>模型可同时撰写的回复数：包括本窗口的回复，以及其他程序通过本地 API 服务器请求的回复。每个回复在内存中保留自己的上下文，因此数量越多占用内存越多；同时撰写多个回复时，每个回复会稍慢，但总体更快。“自动”会根据可用内存来选择。</translation>
    </message>
    <message>
        <source>Guess ahead from the conversation</source>
        <translation>根据对话预先猜测</translation>
    </message>
    <message>
        <source>Speculative decoding: where a reply copies from the conversation (code to edit, a text to quote), the words that followed there are checked several at a time, when that is faster on this machine. The model checks every guess, but on a CPU a guessed word is computed in a batch whose last digits differ, so a reply can now and then differ from the one without guessing. The diagnostics panel shows how many guesses were kept.</source>
        <translation>推测解码：当回复照抄对话中的内容（要修改的代码、要引用的文字）时，会一次检查多个在那里紧随其后的词，前提是这在本机上更快。模型会核对每个猜测，但在 CPU 上，猜测的词是在一个批次中计算的，其最后几位数字会有差异，因此回复偶尔会与不猜测时的回复不同。诊断面板会显示保留了多少猜测。</translation>
    </message>
    <message>
        <source>Draft model</source>
        <translation>草稿模型</translation>
    </message>
    <message>
        <source>A smaller model of the same family writes a few words ahead, and the open model checks them together: faster where the small one guesses well, slower where it does not. The reply is the open model&apos;s own. Offered: the downloaded models with the open model&apos;s vocabulary. It takes memory of its own.</source>
        <translation>一个同系列的较小模型预先写出几个词，由当前打开的模型一起核对：小模型猜得准时更快，猜不准时更慢。回复仍是当前模型自己的。可选的是与当前模型词表相同的已下载模型。它会占用额外的内存。</translation>
    </message>
    <message>
        <source>Prompt threads (0: every physical core)</source>
        <translation>提示线程（0：全部物理核心）</translation>
    </message>
    <message>
        <source>Batch size</source>
        <translation>批大小</translation>
    </message>
    <message>
        <source>Prompt cache in memory (MB, 0: off)</source>
        <translation>内存中的提示缓存（MB，0 为关闭）</translation>
    </message>
    <message>
        <source>Prompt cache on disk (MB, 0: off)</source>
        <translation>磁盘上的提示缓存（MB，0 为关闭）</translation>
    </message>
    <message>
        <source>Queue bound (pieces)</source>
        <translation>队列上限（片段数）</translation>
    </message>
    <message>
        <source>Choose on or off.</source>
        <translation>请选择开或关。</translation>
    </message>
    <message>
        <source>Choose one.</source>
        <translation>请选择一项。</translation>
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
        <source>Enter a whole number from {minimum} to {maximum}, or nothing for {empty}.</source>
        <translation>请输入 {minimum} 到 {maximum} 之间的整数，或留空表示{empty}。</translation>
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
        <source>{name} is not a projector: choose the model&apos;s mmproj file, the one its download page names for it.</source>
        <translation>{name} 不是投影器：请选择该模型的 mmproj 文件，即其下载页面为它指明的那个。</translation>
    </message>
    <message>
        <source>{name} is downloaded and ready to open.</source>
        <translation>{name} 已下载，可以打开。</translation>
    </message>
    <message>
        <source>There is no system keyring, so the API key is kept only until Floodgate closes.</source>
        <translation>没有系统密钥环，因此 API 密钥只保留到 Floodgate 关闭为止。</translation>
    </message>
    <message>
        <source>The model&apos;s chat template cannot be used: {reason}</source>
        <translation>模型的聊天模板无法使用：{reason}</translation>
    </message>
    <message>
        <source>The model&apos;s chat template refused this conversation: {message}</source>
        <translation>模型的聊天模板拒绝了此对话：{message}</translation>
    </message>
    <message>
        <source>The model&apos;s chat template failed: {reason}</source>
        <translation>模型的聊天模板出错：{reason}</translation>
    </message>
    <message>
        <source>The model&apos;s chat template rendered an empty prompt, so there is nothing for the model to answer.</source>
        <translation>模型的聊天模板生成了空提示，模型没有可回答的内容。</translation>
    </message>
    <message>
        <source>The model&apos;s chat template did not finish before Stop; nothing was sent to the model.</source>
        <translation>在按下停止之前，模型的聊天模板没有完成；没有内容发送给模型。</translation>
    </message>
    <message>
        <source>The model&apos;s chat template did not finish within {seconds} seconds, so nothing was sent to the model. The template in this model file is broken or hostile.</source>
        <translation>模型的聊天模板在 {seconds} 秒内没有完成，因此没有内容发送给模型。此模型文件中的模板已损坏或带有恶意。</translation>
    </message>
    <message>
        <source>The model&apos;s chat template did not finish: it used more than {megabytes} MB of memory, so nothing was sent to the model. The template in this model file is broken or hostile.</source>
        <translation>模型的聊天模板没有完成：它使用了超过 {megabytes} MB 内存，因此没有内容发送给模型。此模型文件中的模板已损坏或带有恶意。</translation>
    </message>
    <message>
        <source>The model&apos;s chat template did not finish: its prompt grew past {limit} characters, so nothing was sent to the model. The template in this model file is broken or hostile.</source>
        <translation>模型的聊天模板没有完成：生成的提示超过了 {limit} 个字符，因此没有内容发送给模型。此模型文件中的模板已损坏或带有恶意。</translation>
    </message>
    <message>
        <source>The model&apos;s chat template did not finish: it tried to build a value larger than {limit} characters, so nothing was sent to the model. The template in this model file is broken or hostile.</source>
        <translation>模型的聊天模板没有完成：它试图构造超过 {limit} 个字符的值，因此没有内容发送给模型。此模型文件中的模板已损坏或带有恶意。</translation>
    </message>
    <message>
        <source>{name} was not found: it may have been moved or deleted.</source>
        <translation>找不到 {name}：它可能已被移动或删除。</translation>
    </message>
    <message>
        <source>{name} is a folder. Attach the files inside it instead.</source>
        <translation>{name} 是文件夹。请改为附加其中的文件。</translation>
    </message>
    <message>
        <source>{name} is not an ordinary file (it is a pipe, a device or a socket), so it cannot be read.</source>
        <translation>{name} 不是普通文件（而是管道、设备或套接字），无法读取。</translation>
    </message>
    <message>
        <source>{name} is empty: there is nothing in it to read.</source>
        <translation>{name} 是空的：没有可读取的内容。</translation>
    </message>
    <message>
        <source>{name} is {size}, larger than the {limit} an attachment may be.</source>
        <translation>{name} 大小为 {size}，超过附件上限 {limit}。</translation>
    </message>
    <message>
        <source>{name} cannot be read: you do not have permission to open it.</source>
        <translation>无法读取 {name}：你没有打开它的权限。</translation>
    </message>
    <message>
        <source>{name} could not be read: {reason}</source>
        <translation>无法读取 {name}：{reason}</translation>
    </message>
    <message>
        <source>{name} is an image. Floodgate reads the text of files: documents, source code and PDFs.</source>
        <translation>{name} 是图片。Floodgate 读取文件中的文字：文档、源代码和 PDF。</translation>
    </message>
    <message>
        <source>{name} is not a text file or a PDF. Floodgate reads text, source code, Markdown, CSV, JSON, HTML and PDF files; save other documents as PDF or plain text first.</source>
        <translation>{name} 不是文本文件或 PDF。Floodgate 读取文本、源代码、Markdown、CSV、JSON、HTML 和 PDF 文件；其他文档请先另存为 PDF 或纯文本。</translation>
    </message>
    <message>
        <source>{name} is a PDF locked with a password, so its text cannot be read.</source>
        <translation>{name} 是受密码保护的 PDF，无法读取其中的文字。</translation>
    </message>
    <message>
        <source>{name} has no text to read: its pages are probably scanned images.</source>
        <translation>{name} 中没有可读取的文字：它的页面可能是扫描图片。</translation>
    </message>
    <message>
        <source>{name} could not be read as a PDF: the file may be damaged.</source>
        <translation>无法将 {name} 作为 PDF 读取：文件可能已损坏。</translation>
    </message>
    <message>
        <source>Reading {name} was cancelled.</source>
        <translation>已取消读取 {name}。</translation>
    </message>
    <message>
        <source>There is no room left in the context for any part of {name}.</source>
        <translation>上下文中已没有空间容纳 {name} 的任何部分。</translation>
    </message>
    <message>
        <source>Saving the chat history failed ({reason}). Floodgate keeps trying; until it works, what is on screen is only in memory, and can be exported.</source>
        <translation>保存聊天记录失败（{reason}）。Floodgate 会继续尝试；在成功之前，屏幕上的内容只保存在内存中，可以导出。</translation>
    </message>
    <message>
        <source>The chat history is being saved again; everything on screen is in it.</source>
        <translation>聊天记录已恢复保存；屏幕上的所有内容都已保存。</translation>
    </message>
    <message>
        <source>{name} could not be read because of an unexpected error: {reason}</source>
        <translation>由于意外错误，无法读取 {name}：{reason}</translation>
    </message>
    <message>
        <source>The tokens of {name} could not be counted: {reason}</source>
        <translation>无法统计 {name} 的词元数：{reason}</translation>
    </message>
    <message>
        <source>Open a model first: the part of {name} that fits is measured in its tokens.</source>
        <translation>请先打开模型：{name} 放得下的部分要按该模型的词元计算。</translation>
    </message>
    <message>
        <source>{name} could not be kept with the conversation: {reason}</source>
        <translation>{name} 无法随对话保存：{reason}</translation>
    </message>
    <message>
        <source>{name} is {size}, more than the {limit} a picture may be.</source>
        <translation>{name} 大小为 {size}，超过了图片允许的 {limit}。</translation>
    </message>
    <message>
        <source>reply start</source>
        <translation>回复开始</translation>
    </message>
    <message>
        <source>first token</source>
        <translation>第一个词元</translation>
    </message>
    <message>
        <source>prompt processing</source>
        <translation>提示处理</translation>
    </message>
    <message>
        <source>prompt processed</source>
        <translation>提示已处理</translation>
    </message>
    <message>
        <source>stop pressed</source>
        <translation>按下停止</translation>
    </message>
    <message>
        <source>computation ended</source>
        <translation>计算结束</translation>
    </message>
    <message>
        <source>reply end</source>
        <translation>回复结束</translation>
    </message>
    <message>
        <source>side by side</source>
        <translation>并行</translation>
    </message>
    <message>
        <source>paused</source>
        <translation>已暂停</translation>
    </message>
    <message>
        <source>resumed</source>
        <translation>已恢复</translation>
    </message>
    <message>
        <source>{tokens} tokens</source>
        <translation>{tokens} 个词元</translation>
    </message>
    <message>
        <source>{tokens} tokens, {cached} cached</source>
        <translation>{tokens} 个词元，{cached} 个来自缓存</translation>
    </message>
    <message>
        <source>{rate} tokens/s</source>
        <translation>{rate} 词元/秒</translation>
    </message>
    <message>
        <source>{n} replies</source>
        <translation>{n} 个回复</translation>
    </message>
    <message>
        <source>alone</source>
        <translation>单独</translation>
    </message>
    <message>
        <source>Some characters in your message could not be kept and were replaced with �.</source>
        <translation>你的消息中有些字符无法保存，已替换为 �。</translation>
    </message>
    <message>
        <source>it is not valid JSON (line {line}, column {column})</source>
        <translation>它不是有效的 JSON（第 {line} 行，第 {column} 列）</translation>
    </message>
    <message>
        <source>it is nested too deeply</source>
        <translation>它的嵌套层次太深</translation>
    </message>
    <message>
        <source>it is not a conversation exported by Floodgate</source>
        <translation>它不是 Floodgate 导出的对话</translation>
    </message>
    <message>
        <source>it was made by a newer Floodgate</source>
        <translation>它由更新版本的 Floodgate 生成</translation>
    </message>
    <message>
        <source>message {n} has the same id as an earlier one</source>
        <translation>第 {n} 条消息的 id 与之前的一条相同</translation>
    </message>
    <message>
        <source>message {n} follows a message that is not in the file</source>
        <translation>第 {n} 条消息接在文件中不存在的消息之后</translation>
    </message>
    <message>
        <source>the message it shows (leaf_id) is not in the file</source>
        <translation>它显示的消息（leaf_id）不在文件中</translation>
    </message>
    <message>
        <source>message {n} is not an object</source>
        <translation>第 {n} 条消息不是对象</translation>
    </message>
    <message>
        <source>message {n} has an unknown role ({role})</source>
        <translation>第 {n} 条消息的角色未知（{role}）</translation>
    </message>
    <message>
        <source>message {n} has an unknown status ({status})</source>
        <translation>第 {n} 条消息的状态未知（{status}）</translation>
    </message>
    <message>
        <source>in message {n}, attachment {k} is not a file as Floodgate keeps it (a name, a kind, a size and a text)</source>
        <translation>第 {n} 条消息中，附件 {k} 不是 Floodgate 保存的文件格式（名称、类型、大小和文字）</translation>
    </message>
    <message>
        <source>message {n} follows itself through the messages before it</source>
        <translation>第 {n} 条消息经由之前的消息接在自己之后</translation>
    </message>
    <message>
        <source>in message {n}, “{field}” is missing or has the wrong type</source>
        <translation>第 {n} 条消息中，“{field}”缺失或类型错误</translation>
    </message>
    <message>
        <source>“{field}” is missing or has the wrong type</source>
        <translation>“{field}”缺失或类型错误</translation>
    </message>
    <message>
        <source>The chat history file {path} was deleted while Floodgate was running. Floodgate created it again, with every conversation.</source>
        <translation>聊天记录文件 {path} 在 Floodgate 运行时被删除。Floodgate 已重新创建它，并包含所有对话。</translation>
    </message>
    <message>
        <source>The chat history file {path} was deleted while Floodgate was running. Floodgate created it again with the conversations of this session; older ones are in the backups in {folder}.</source>
        <translation>聊天记录文件 {path} 在 Floodgate 运行时被删除。Floodgate 已用本次会话的对话重新创建它；较早的对话在 {folder} 的备份中。</translation>
    </message>
    <message>
        <source>The chat history file {path} was replaced while Floodgate was running. Floodgate wrote every conversation to it again; the file that replaced it was kept as {aside}.</source>
        <translation>聊天记录文件 {path} 在 Floodgate 运行时被替换。Floodgate 已重新写入所有对话；替换它的文件保存为 {aside}。</translation>
    </message>
    <message>
        <source>The chat history file {path} was replaced while Floodgate was running. Floodgate wrote the conversations of this session to it again (older ones are in the backups in {folder}); the file that replaced it was kept as {aside}.</source>
        <translation>聊天记录文件 {path} 在 Floodgate 运行时被替换。Floodgate 已重新写入本次会话的对话（较早的在 {folder} 的备份中）；替换它的文件保存为 {aside}。</translation>
    </message>
    <message>
        <source>The chat history in {path} is damaged; it was kept, untouched, as {aside}. Floodgate opened its backup from {time} ({count} conversations as they were then) and recovered {recovered} newer conversations from the damaged file; the rest of what was written after {time} is lost.</source>
        <translation>{path} 中的聊天记录已损坏；它原样保存为 {aside}。Floodgate 打开了 {time} 的备份（当时的 {count} 个对话），并从损坏的文件中恢复了 {recovered} 个较新的对话；{time} 之后写入的其余内容已丢失。</translation>
    </message>
    <message>
        <source>The chat history in {path} is damaged; it was kept, untouched, as {aside}. Floodgate opened its backup from {time}: {count} conversations as they were then. What was written after {time} is lost.</source>
        <translation>{path} 中的聊天记录已损坏；它原样保存为 {aside}。Floodgate 打开了 {time} 的备份：当时的 {count} 个对话。{time} 之后写入的内容已丢失。</translation>
    </message>
    <message>
        <source>The chat history in {path} was damaged while Floodgate was running; it was kept as {aside}. Floodgate opened its backup from {time} and wrote this session&apos;s conversations to it again.</source>
        <translation>{path} 中的聊天记录在 Floodgate 运行时损坏；它保存为 {aside}。Floodgate 打开了 {time} 的备份，并重新写入了本次会话的对话。</translation>
    </message>
    <message>
        <source>The chat history in {path} was damaged while Floodgate was running; it was kept as {aside}. There is no backup, so Floodgate started a new history with this session&apos;s conversations.</source>
        <translation>{path} 中的聊天记录在 Floodgate 运行时损坏；它保存为 {aside}。没有备份，因此 Floodgate 用本次会话的对话新建了一份记录。</translation>
    </message>
    <message>
        <source>Floodgate cannot lock its data folder {folder}, so it cannot tell whether another Floodgate uses it too.</source>
        <translation>Floodgate 无法锁定数据文件夹 {folder}，因此无法判断是否有另一个 Floodgate 也在使用它。</translation>
    </message>
    <message>
        <source>Floodgate cannot listen for other launches ({reason}); a second launch will say that this one does not answer.</source>
        <translation>Floodgate 无法监听其他启动（{reason}）；再次启动时会提示此实例没有响应。</translation>
    </message>
    <message>
        <source>Floodgate is already running with the data folder {folder} on another computer ({host}). Close it there first, or start this one with another data folder (FLOODGATE_HOME).</source>
        <translation>另一台计算机（{host}）上的 Floodgate 正在使用数据文件夹 {folder}。请先在那里关闭它，或用另一个数据文件夹（FLOODGATE_HOME）启动此实例。</translation>
    </message>
    <message>
        <source>Floodgate is already running with the data folder {folder} (process {pid}), but it did not answer: {reason}. Close it, or start this one with another data folder (FLOODGATE_HOME).</source>
        <translation>Floodgate 已在使用数据文件夹 {folder} 运行（进程 {pid}），但它没有响应：{reason}。请关闭它，或用另一个数据文件夹（FLOODGATE_HOME）启动此实例。</translation>
    </message>
    <message>
        <source>starting</source>
        <translation>启动</translation>
    </message>
    <message>
        <source>loading a model</source>
        <translation>加载模型</translation>
    </message>
    <message>
        <source>processing a prompt</source>
        <translation>处理提示</translation>
    </message>
    <message>
        <source>writing a reply</source>
        <translation>生成回复</translation>
    </message>
    <message>
        <source>waiting for a prompt</source>
        <translation>等待提示</translation>
    </message>
    <message>
        <source>no error was recorded: it was killed</source>
        <translation>未记录错误：进程被终止</translation>
    </message>
    <message>
        <source>no model open</source>
        <translation>未打开模型</translation>
    </message>
    <message>
        <source>not known (no model had been loaded)</source>
        <translation>未知（尚未加载模型）</translation>
    </message>
    <message>
        <source>The last session ended unexpectedly ({fault}) while {activity}, with {model}. What was typed and received is kept; a reply cut off is marked as interrupted. llama.cpp was built with: {build}. The details are in {file}. If it happens again, `floodgate --self-test` checks the build.</source>
        <translation>上次会话在{activity}时意外结束（{fault}），模型：{model}。已输入和已收到的内容都已保留；被中断的回复已标记为中断。llama.cpp 的构建：{build}。详情见 {file}。如果再次发生，可运行 `floodgate --self-test` 检查构建。</translation>
    </message>
    <message>
        <source>The last floodgate serve ended unexpectedly ({fault}) while {activity}, with {model}. llama.cpp was built with: {build}. The details are in {file}. If it happens again, `floodgate --self-test` checks the build.</source>
        <translation>上次的 floodgate serve 在{activity}时意外结束（{fault}），模型：{model}。llama.cpp 的构建：{build}。详情见 {file}。如果再次发生，可运行 `floodgate --self-test` 检查构建。</translation>
    </message>
    <message>
        <source>API {address} · {running} running, {queued} queued</source>
        <translation>API {address} · {running} 个运行中，{queued} 个排队中</translation>
    </message>
    <message>
        <source>The API server listens on {host} only with an API key: any machine that reaches this one could use the model otherwise. Set a key, or use 127.0.0.1.</source>
        <translation>API 服务器只有在设置 API 密钥后才会监听 {host}：否则任何能访问本机的机器都能使用该模型。请设置密钥，或使用 127.0.0.1。</translation>
    </message>
    <message>
        <source>The API server did not start: {reason}</source>
        <translation>API 服务器未能启动：{reason}</translation>
    </message>
    <message>
        <source>The API server cannot listen on {host}:{port}: {reason}. Another program may use that port; choose another one.</source>
        <translation>API 服务器无法监听 {host}:{port}：{reason}。可能有其他程序正在使用该端口；请换一个端口。</translation>
    </message>
    <message>
        <source>The header of {name} cannot be fetched: HTTP {status}.</source>
        <translation>无法获取 {name} 的文件头：HTTP {status}。</translation>
    </message>
    <message>
        <source>The header of {name} cannot be fetched: {reason}.</source>
        <translation>无法获取 {name} 的文件头：{reason}。</translation>
    </message>
    <message>
        <source>The header of {name} is cut short or longer than Floodgate reads.</source>
        <translation>{name} 的文件头不完整，或超出 Floodgate 读取的长度。</translation>
    </message>
    <message>
        <source>The Hugging Face Hub at {endpoint} cannot be reached ({reason}). Models already on this computer keep working.</source>
        <translation>无法连接位于 {endpoint} 的 Hugging Face Hub（{reason}）。本机已有的模型仍可使用。</translation>
    </message>
    <message>
        <source>The Hub refused access to {repo} (HTTP {status}): it is gated or private. Open {endpoint}/{repo} in a browser, sign in and accept its terms, then create an access token at {endpoint}/settings/tokens and give it to Floodgate.</source>
        <translation>Hub 拒绝访问 {repo}（HTTP {status}）：该仓库需要授权或为私有。请在浏览器中打开 {endpoint}/{repo}，登录并接受其条款，然后在 {endpoint}/settings/tokens 创建访问令牌并提供给 Floodgate。</translation>
    </message>
    <message>
        <source>The Hub has no repository {repo}.</source>
        <translation>Hub 上没有仓库 {repo}。</translation>
    </message>
    <message>
        <source>The Hub has no such version of {repo}.</source>
        <translation>Hub 上没有 {repo} 的这个版本。</translation>
    </message>
    <message>
        <source>The Hub answered with an error: HTTP {status}.</source>
        <translation>Hub 返回错误：HTTP {status}。</translation>
    </message>
    <message>
        <source>The Hub at {endpoint} sent an answer Floodgate cannot read.</source>
        <translation>位于 {endpoint} 的 Hub 返回了 Floodgate 无法读取的应答。</translation>
    </message>
    <message>
        <source>{repo} is not a repository name (owner/name) on the Hub.</source>
        <translation>{repo} 不是 Hub 上的仓库名（所有者/名称）。</translation>
    </message>
    <message>
        <source>The download of {name} failed: {reason}</source>
        <translation>{name} 下载失败：{reason}</translation>
    </message>
    <message>
        <source>A different file named {name} is already in {folder}. Move it away to download this one.</source>
        <translation>{folder} 中已有另一个名为 {name} 的文件。请先将其移走，再下载此文件。</translation>
    </message>
    <message>
        <source>There is not enough free disk space for {name}: it needs {needed} in {folder}, and {free} are free. Free some space, or choose a smaller model.</source>
        <translation>磁盘空间不足，无法下载 {name}：需要在 {folder} 中有 {needed}，目前可用 {free}。请释放空间，或选择更小的模型。</translation>
    </message>
    <message>
        <source>The Hub has no file {file} in {repo} (HTTP 404).</source>
        <translation>Hub 上的 {repo} 中没有文件 {file}（HTTP 404）。</translation>
    </message>
    <message>
        <source>The Hub answered HTTP {status} for {file}.</source>
        <translation>Hub 对 {file} 返回了 HTTP {status}。</translation>
    </message>
    <message>
        <source>{file} cannot be written: {reason}.</source>
        <translation>无法写入 {file}：{reason}。</translation>
    </message>
    <message>
        <source>The disk is full: the download of {name} stopped at {done} of {size}. What arrived is kept; free some space and resume.</source>
        <translation>磁盘已满：{name} 的下载停在 {done}/{size}。已下载的部分会保留；请释放空间后继续。</translation>
    </message>
    <message>
        <source>{name} arrived damaged: its sha256 is not the one the Hub lists, so it was deleted. Download it again.</source>
        <translation>{name} 下载后已损坏：其 sha256 与 Hub 所列不符，已删除。请重新下载。</translation>
    </message>
    <message>
        <source>{name} is not a GGUF model file, though the Hub lists it as one; it was deleted.</source>
        <translation>{name} 不是 GGUF 模型文件（尽管 Hub 将其列为模型），已删除。</translation>
    </message>
    <message>
        <source>The server sent {got} bytes for {name}, but the Hub lists {size}; the download was deleted.</source>
        <translation>服务器为 {name} 发送了 {got} 字节，但 Hub 列出的是 {size}；下载已删除。</translation>
    </message>
    <message>
        <source>The download of {name} stalled: no data for {seconds} seconds, {tries} times. What arrived is kept; resume it later.</source>
        <translation>{name} 的下载停滞：{seconds} 秒内没有数据，共 {tries} 次。已下载的部分会保留；请稍后继续。</translation>
    </message>
    <message>
        <source>The download of {name} failed {tries} times ({reason}). What arrived is kept; resume it later.</source>
        <translation>{name} 的下载失败了 {tries} 次（{reason}）。已下载的部分会保留；请稍后继续。</translation>
    </message>
    <message>
        <source>fits the GPU</source>
        <translation>可放入 GPU</translation>
    </message>
    <message>
        <source>fits</source>
        <translation>可运行</translation>
    </message>
    <message>
        <source>tight</source>
        <translation>勉强</translation>
    </message>
    <message>
        <source>too large</source>
        <translation>过大</translation>
    </message>
    <message>
        <source>Waiting</source>
        <translation>等待中</translation>
    </message>
    <message>
        <source>Downloading</source>
        <translation>下载中</translation>
    </message>
    <message>
        <source>Paused</source>
        <translation>已暂停</translation>
    </message>
    <message>
        <source>Downloaded</source>
        <translation>已下载</translation>
    </message>
    <message>
        <source>Stopped</source>
        <translation>已停止</translation>
    </message>
    <message>
        <source>Cancelled</source>
        <translation>已取消</translation>
    </message>
    <message>
        <source>{n} s left</source>
        <translation>剩余 {n} 秒</translation>
    </message>
    <message>
        <source>{n} min left</source>
        <translation>剩余 {n} 分钟</translation>
    </message>
    <message>
        <source>{n} h left</source>
        <translation>剩余 {n} 小时</translation>
    </message>
    <message>
        <source>{done} of {total}</source>
        <translation>{done} / {total}</translation>
    </message>
    <message>
        <source>{speed}/s</source>
        <translation>{speed}/秒</translation>
    </message>
    <message>
        <source>+ its projector {projector} ({size}): it sees</source>
        <translation>+ 它的投影器 {projector}（{size}）：能看图片</translation>
    </message>
    <message>
        <source>{n} waiting</source>
        <translation>{n} 个等待中</translation>
    </message>
    <message>
        <source>{n} paused</source>
        <translation>{n} 个已暂停</translation>
    </message>
    <message>
        <source>Floodgate opened {default} rather than {model}, the model it was loading when it ended. The model picker above the chat opens {model} again.</source>
        <translation>Floodgate 打开了 {default}，而不是 {model}：上次意外结束时正在加载的就是它。可以用对话上方的模型选择器再次打开 {model}。</translation>
    </message>
    <message>
        <source>CPU (too little GPU memory free)</source>
        <translation>CPU（GPU 空闲显存不足）</translation>
    </message>
    <message>
        <source>CPU</source>
        <translation>CPU</translation>
    </message>
    <message>
        <source>GPU · {layers} of {all} layers ({cpu} on the CPU: too little GPU memory) · {size}</source>
        <translation>GPU · {all} 层中的 {layers} 层（{cpu} 层在 CPU 上：GPU 显存不足）· {size}</translation>
    </message>
    <message>
        <source>GPU · {layers} of {all} layers · {size}</source>
        <translation>GPU · {all} 层中的 {layers} 层 · {size}</translation>
    </message>
    <message>
        <source>On {gpu}: {layers} of {all} layers; {cpu} stay on the CPU, since the GPU has {budget} free for this model (it would need more for all of them).</source>
        <translation>在 {gpu} 上：{all} 层中的 {layers} 层；{cpu} 层留在 CPU 上，因为 GPU 只有 {budget} 可供此模型使用（放下全部层需要更多）。</translation>
    </message>
    <message>
        <source>On {gpu}: every layer, with the context reduced from {asked} tokens so that it fits the {budget} the GPU has free.</source>
        <translation>在 {gpu} 上：全部层，上下文从 {asked} 个词元缩小，以放入 GPU 空闲的 {budget}。</translation>
    </message>
    <message>
        <source>On {gpu}: {layers} of {all} layers, as set in Settings.</source>
        <translation>在 {gpu} 上：{all} 层中的 {layers} 层，按设置。</translation>
    </message>
    <message>
        <source>On {gpu}: {layers} of {all} layers.</source>
        <translation>在 {gpu} 上：{all} 层中的 {layers} 层。</translation>
    </message>
    <message>
        <source>{where} {used} in use on the GPU ({need} estimated).</source>
        <translation>{where}GPU 上已用 {used}（估计 {need}）。</translation>
    </message>
    <message>
        <source>{where} About {need} on the GPU.</source>
        <translation>{where}GPU 上约 {need}。</translation>
    </message>
    <message>
        <source>On the CPU: loading it on the GPU failed.</source>
        <translation>在 CPU 上：在 GPU 上加载失败。</translation>
    </message>
    <message>
        <source>On the CPU: not one layer fits the {budget} the GPU has free for it.</source>
        <translation>在 CPU 上：GPU 空闲的 {budget} 连一层都放不下。</translation>
    </message>
    <message>
        <source>On the CPU, as set.</source>
        <translation>在 CPU 上，按设置。</translation>
    </message>
    <message>
        <source>On the CPU (no GPU was found).</source>
        <translation>在 CPU 上（未找到 GPU）。</translation>
    </message>
    <message>
        <source>The GPU driver did not answer within {seconds} s while Floodgate listed the devices, so models run on the CPU.</source>
        <translation>Floodgate 列出设备时，GPU 驱动在 {seconds} 秒内没有响应，因此模型在 CPU 上运行。</translation>
    </message>
    <message>
        <source>The GPU driver failed while Floodgate listed the devices ({reason}), so models run on the CPU. Updating the GPU driver may help.</source>
        <translation>Floodgate 列出设备时 GPU 驱动出错（{reason}），因此模型在 CPU 上运行。更新 GPU 驱动或许有帮助。</translation>
    </message>
    <message>
        <source>The GPU {name} chosen in Settings is not there now; Auto was used.</source>
        <translation>设置中选择的 GPU {name} 现在不存在；已改用自动。</translation>
    </message>
    <message>
        <source>Loading {tried} layers on the GPU failed ({reason}), probably for want of GPU memory; the model runs on the CPU.</source>
        <translation>在 GPU 上加载 {tried} 层失败（{reason}），可能是 GPU 显存不足；模型在 CPU 上运行。</translation>
    </message>
    <message>
        <source>Loading {tried} layers on the GPU failed ({reason}), probably for want of GPU memory; {got} layers were loaded there instead.</source>
        <translation>在 GPU 上加载 {tried} 层失败（{reason}），可能是 GPU 显存不足；改为在那里加载了 {got} 层。</translation>
    </message>
    <message>
        <source>Batch: {used} of {places} places in use · {decoding} decoding side by side · {paused} paused (slow reader)</source>
        <translation>批处理：已用 {used} / {places} 个位置 · {decoding} 个正在并行解码 · {paused} 个已暂停（读取方较慢）</translation>
    </message>
    <message>
        <source>Batch: {used} of {places} places in use · {decoding} decoding side by side</source>
        <translation>批处理：已用 {used} / {places} 个位置 · {decoding} 个正在并行解码</translation>
    </message>
    <message>
        <source>{name} is {width} by {height} pixels, larger than the {limit} megapixels Floodgate reads. Attach a smaller copy.</source>
        <translation>{name} 为 {width} × {height} 像素，超过了 Floodgate 能读取的 {limit} 百万像素。请附加一个更小的副本。</translation>
    </message>
    <message>
        <source>{name} is not a picture Floodgate can read (PNG, JPEG, WebP, GIF or BMP), or it is damaged.</source>
        <translation>{name} 不是 Floodgate 能读取的图片（PNG、JPEG、WebP、GIF 或 BMP），或者文件已损坏。</translation>
    </message>
    <message>
        <source>The projector {name} cannot be read: {reason}</source>
        <translation>无法读取投影器 {name}：{reason}</translation>
    </message>
    <message>
        <source>The sound could not be encoded (code {code}).</source>
        <translation>无法编码该声音（代码 {code}）。</translation>
    </message>
    <message>
        <source>The pictures and sounds could not be placed in the prompt (code {code}).</source>
        <translation>无法将图片和声音放入提示（代码 {code}）。</translation>
    </message>
    <message>
        <source>The sounds could not be placed in the prompt (code {code}).</source>
        <translation>无法将声音放入提示（代码 {code}）。</translation>
    </message>
    <message>
        <source>The pictures could not be placed in the prompt (code {code}).</source>
        <translation>无法将图片放入提示中（代码 {code}）。</translation>
    </message>
    <message>
        <source>The picture could not be encoded (code {code}).</source>
        <translation>无法编码这张图片（代码 {code}）。</translation>
    </message>
    <message>
        <source>{name} could not be opened as this model&apos;s projector: it was made for another model, or the file is damaged, or it is not a projector this version of llama.cpp reads. Choose the projector that came with the model.</source>
        <translation>无法将 {name} 作为此模型的投影器打开：它可能是为其他模型制作的，或者文件已损坏，或者不是此版本 llama.cpp 能读取的投影器。请选择随模型提供的投影器。</translation>
    </message>
    <message>
        <source>another kind of tokenizer</source>
        <translation>分词器的种类不同</translation>
    </message>
    <message>
        <source>{other} tokens, not {count}</source>
        <translation>有 {other} 个词元，而不是 {count} 个</translation>
    </message>
    <message>
        <source>other beginning or end tokens</source>
        <translation>开始或结束词元不同</translation>
    </message>
    <message>
        <source>token {token} is another piece of text</source>
        <translation>词元 {token} 对应的文本不同</translation>
    </message>
    <message>
        <source>{draft} cannot guess ahead for {model}: their vocabularies differ ({how}). Choose a draft model of the same family (in Settings, Compute), or none.</source>
        <translation>{draft} 无法为 {model} 预先猜测：它们的词表不同（{how}）。请选择同系列的草稿模型（在“设置”的“计算”中），或不使用草稿模型。</translation>
    </message>
    <message>
        <source>{name} is {length} long (minutes:seconds); Floodgate reads sounds of up to {limit} minutes. Attach a shorter part of it.</source>
        <translation>{name} 长 {length}（分:秒）；Floodgate 只读取最长 {limit} 分钟的声音。请附加其中较短的一段。</translation>
    </message>
    <message>
        <source>{name} is not a sound Floodgate can read (WAV, MP3 or FLAC), or it is damaged.</source>
        <translation>{name} 不是 Floodgate 能读取的声音（WAV、MP3 或 FLAC），或者已损坏。</translation>
    </message>
    <message>
        <source>{name} is {size}, more than the {limit} a sound may be.</source>
        <translation>{name} 大小为 {size}，超过了声音文件的上限 {limit}。</translation>
    </message>
</context>
<context>
    <name>HubPanel</name>
    <message>
        <source>Search GGUF models on the Hugging Face Hub</source>
        <translation>在 Hugging Face Hub 上搜索 GGUF 模型</translation>
    </message>
    <message>
        <source>Most downloaded</source>
        <translation>下载最多</translation>
    </message>
    <message>
        <source>Most liked</source>
        <translation>点赞最多</translation>
    </message>
    <message>
        <source>Recently updated</source>
        <translation>最近更新</translation>
    </message>
    <message>
        <source>Sees pictures</source>
        <translation>能看图片</translation>
    </message>
    <message>
        <source>Only models that read pictures (with their projector)</source>
        <translation>只显示能读取图片的模型（带有投影器）</translation>
    </message>
    <message>
        <source>Search</source>
        <translation>搜索</translation>
    </message>
    <message>
        <source>Repository</source>
        <translation>仓库</translation>
    </message>
    <message>
        <source>Downloads</source>
        <translation>下载量</translation>
    </message>
    <message>
        <source>Likes</source>
        <translation>点赞</translation>
    </message>
    <message>
        <source>Updated</source>
        <translation>更新时间</translation>
    </message>
    <message>
        <source>More results</source>
        <translation>更多结果</translation>
    </message>
    <message>
        <source>File</source>
        <translation>文件</translation>
    </message>
    <message>
        <source>Quantization</source>
        <translation>量化</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>大小</translation>
    </message>
    <message>
        <source>Memory needed</source>
        <translation>所需内存</translation>
    </message>
    <message>
        <source>Fit</source>
        <translation>适配</translation>
    </message>
    <message>
        <source>Download</source>
        <translation>下载</translation>
    </message>
    <message>
        <source>Access token…</source>
        <translation>访问令牌…</translation>
    </message>
    <message>
        <source>Progress</source>
        <translation>进度</translation>
    </message>
    <message>
        <source>Status</source>
        <translation>状态</translation>
    </message>
    <message>
        <source>Pause</source>
        <translation>暂停</translation>
    </message>
    <message>
        <source>Resume</source>
        <translation>继续</translation>
    </message>
    <message>
        <source>Cancel download</source>
        <translation>取消下载</translation>
    </message>
    <message>
        <source>Open</source>
        <translation>打开</translation>
    </message>
    <message>
        <source>Searching…</source>
        <translation>正在搜索…</translation>
    </message>
    <message>
        <source>No GGUF models match.</source>
        <translation>没有匹配的 GGUF 模型。</translation>
    </message>
    <message>
        <source>(gated)</source>
        <translation>（需授权）</translation>
    </message>
    <message>
        <source>Reading {repo}…</source>
        <translation>正在读取 {repo}…</translation>
    </message>
    <message>
        <source>licence: {licence}</source>
        <translation>许可证：{licence}</translation>
    </message>
    <message>
        <source>not given</source>
        <translation>未注明</translation>
    </message>
    <message>
        <source>gated: accept its terms on the Hub and give an access token</source>
        <translation>需授权：请在 Hub 上接受其条款并提供访问令牌</translation>
    </message>
    <message>
        <source>no GGUF model Floodgate can download</source>
        <translation>没有 Floodgate 可下载的 GGUF 模型</translation>
    </message>
    <message>
        <source>({n} parts)</source>
        <translation>（{n} 个分片）</translation>
    </message>
    <message>
        <source>recommended</source>
        <translation>推荐</translation>
    </message>
    <message>
        <source>Hugging Face access token</source>
        <translation>Hugging Face 访问令牌</translation>
    </message>
    <message>
        <source>A token lets Floodgate download gated and private models you have access to. It is kept in the system keyring.</source>
        <translation>令牌让 Floodgate 能下载你有权访问的需授权模型和私有模型。它保存在系统密钥环中。</translation>
    </message>
    <message>
        <source>There is no system keyring, so the token is not kept.</source>
        <translation>没有系统密钥环，因此不会保存令牌。</translation>
    </message>
</context>
<context>
    <name>MainWindow</name>
    <message>
        <source>Editing a message: Enter sends it as a new version, Esc cancels.</source>
        <translation>正在编辑消息：按 Enter 作为新版本发送，按 Esc 取消。</translation>
    </message>
    <message>
        <source>Flow diagnostics</source>
        <translation>数据流诊断</translation>
    </message>
    <message>
        <source>Attach files</source>
        <translation>附加文件</translation>
    </message>
    <message>
        <source>Attach…</source>
        <translation>附加…</translation>
    </message>
    <message>
        <source>Attach files to the next message ({shortcut})</source>
        <translation>为下一条消息附加文件（{shortcut}）</translation>
    </message>
    <message>
        <source>The open model cannot hear sound. Open a model that can (one whose projector reads audio, with its mmproj file beside it), or remove the sounds.</source>
        <translation>当前打开的模型听不到声音。请打开能听的模型（其投影器能读取音频，mmproj 文件放在它旁边），或移除这些声音。</translation>
    </message>
    <message>
        <source>Pasted picture.png</source>
        <translation>粘贴的图片.png</translation>
    </message>
    <message>
        <source>Send</source>
        <translation>发送</translation>
    </message>
    <message>
        <source>Send the message (Enter)</source>
        <translation>发送消息（Enter）</translation>
    </message>
    <message>
        <source>Stop</source>
        <translation>停止</translation>
    </message>
    <message>
        <source>Stop the reply (Esc)</source>
        <translation>停止回复（Esc）</translation>
    </message>
    <message>
        <source>Stopping…</source>
        <translation>正在停止…</translation>
    </message>
    <message>
        <source>Some files are still being read: wait for them, or remove them.</source>
        <translation>有些文件仍在读取：请等待，或移除它们。</translation>
    </message>
    <message>
        <source>The open model cannot see pictures. Open a model that can (one with a projector, an mmproj file beside it), or remove the pictures.</source>
        <translation>当前打开的模型看不懂图片。请打开一个能看图的模型（旁边带有投影器，即 mmproj 文件），或者移除这些图片。</translation>
    </message>
    <message>
        <source>The attached files do not fit in the context: remove one, or include the part that fits.</source>
        <translation>附加的文件超出了上下文：请移除一个，或只加入放得下的部分。</translation>
    </message>
    <message>
        <source>Type a message first.</source>
        <translation>请先输入消息。</translation>
    </message>
    <message>
        <source>The room left in the context is not known yet.</source>
        <translation>尚不知道上下文还剩多少空间。</translation>
    </message>
    <message>
        <source>The prompt cache is cleared: conversations will be read again.</source>
        <translation>提示缓存已清空：对话将被重新读取。</translation>
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
    <name>ModelHeader</name>
    <message>
        <source>New chat</source>
        <translation>新对话</translation>
    </message>
    <message>
        <source>No model</source>
        <translation>无模型</translation>
    </message>
    <message>
        <source>Model: {name}. Choose another model</source>
        <translation>模型：{name}。选择其他模型</translation>
    </message>
    <message>
        <source>{tokens} tokens of context</source>
        <translation>上下文 {tokens} 个词元</translation>
    </message>
    <message>
        <source>on a server</source>
        <translation>在服务器上</translation>
    </message>
    <message>
        <source>sees and hears</source>
        <translation>能看也能听</translation>
    </message>
    <message>
        <source>sees pictures</source>
        <translation>能看图片</translation>
    </message>
    <message>
        <source>hears sound</source>
        <translation>能听声音</translation>
    </message>
    <message>
        <source>Choose the model that answers</source>
        <translation>选择回答的模型</translation>
    </message>
    <message>
        <source>On this computer</source>
        <translation>本机</translation>
    </message>
    <message>
        <source>No models found yet</source>
        <translation>尚未找到模型</translation>
    </message>
    <message>
        <source>Servers</source>
        <translation>服务器</translation>
    </message>
    <message>
        <source>{model} on {url}</source>
        <translation>{url} 上的 {model}</translation>
    </message>
    <message>
        <source>Connect to a server…</source>
        <translation>连接到服务器…</translation>
    </message>
    <message>
        <source>Open model…</source>
        <translation>打开模型…</translation>
    </message>
    <message>
        <source>Models and downloads…</source>
        <translation>模型与下载…</translation>
    </message>
    <message>
        <source>Draft model</source>
        <translation>草稿模型</translation>
    </message>
    <message>
        <source>None</source>
        <translation>无</translation>
    </message>
    <message>
        <source>The open model writes every word itself, checking none ahead</source>
        <translation>由当前模型自己写出每个词，不预先核对</translation>
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
        <source>On this computer</source>
        <translation>本机</translation>
    </message>
    <message>
        <source>Hugging Face Hub</source>
        <translation>Hugging Face Hub</translation>
    </message>
    <message>
        <source>Projector</source>
        <translation>投影器</translation>
    </message>
    <message>
        <source>The projector (an mmproj file) that lets the selected model see pictures: one chosen by hand, none, or the one in the model&apos;s folder</source>
        <translation>让所选模型能看图片的投影器（mmproj 文件）：手动选择的、不使用，或模型文件夹中的那个</translation>
    </message>
    <message>
        <source>Choose a file…</source>
        <translation>选择文件…</translation>
    </message>
    <message>
        <source>None: read text only</source>
        <translation>不使用：只读文字</translation>
    </message>
    <message>
        <source>The one in its folder</source>
        <translation>模型文件夹中的那个</translation>
    </message>
    <message>
        <source>in use</source>
        <translation>使用中</translation>
    </message>
    <message>
        <source>sees pictures</source>
        <translation>能看图片</translation>
    </message>
    <message>
        <source>hears sound</source>
        <translation>能听声音</translation>
    </message>
    <message>
        <source>yes</source>
        <translation>有</translation>
    </message>
    <message>
        <source>no (generic format)</source>
        <translation>无（使用通用格式）</translation>
    </message>
    <message>
        <source>Projector: {path}</source>
        <translation>投影器：{path}</translation>
    </message>
</context>
<context>
    <name>PictureDialog</name>
    <message>
        <source>picture</source>
        <translation>图片</translation>
    </message>
    <message>
        <source>Loading the picture…</source>
        <translation>正在载入图片…</translation>
    </message>
    <message>
        <source>Picture {name}</source>
        <translation>图片 {name}</translation>
    </message>
    <message>
        <source>The picture could not be shown: its file is missing.</source>
        <translation>无法显示图片：文件不见了。</translation>
    </message>
</context>
<context>
    <name>RemoteDialog</name>
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
    <name>SavingBanner</name>
    <message>
        <source>Export…</source>
        <translation>导出…</translation>
    </message>
    <message>
        <source>Export the conversation on screen</source>
        <translation>导出屏幕上的对话</translation>
    </message>
</context>
<context>
    <name>SettingsDialog</name>
    <message>
        <source>Settings</source>
        <translation>设置</translation>
    </message>
    <message>
        <source>Compute and memory settings apply when the model is opened again.</source>
        <translation>计算和内存设置在重新打开模型后生效。</translation>
    </message>
    <message>
        <source>{label} (command line)</source>
        <translation>{label}（命令行）</translation>
    </message>
    <message>
        <source>Set on the command line for this run; changed here, your choice applies and is saved.</source>
        <translation>本次运行由命令行设定；在此更改后，你的选择会生效并被保存。</translation>
    </message>
    <message>
        <source>Measure decode threads again</source>
        <translation>重新测量解码线程</translation>
    </message>
    <message>
        <source>A few seconds of decoding at each thread count; the fastest is kept.</source>
        <translation>在每个线程数下解码几秒钟，保留最快的。</translation>
    </message>
    <message>
        <source>Auto (the GPU, if there is one)</source>
        <translation>自动（如有 GPU 则用 GPU）</translation>
    </message>
    <message>
        <source>CPU only</source>
        <translation>仅 CPU</translation>
    </message>
    <message>
        <source>{name} (not found now)</source>
        <translation>{name}（现在未找到）</translation>
    </message>
    <message>
        <source>None</source>
        <translation>无</translation>
    </message>
    <message>
        <source>{name} (not of the open model&apos;s vocabulary, or not found)</source>
        <translation>{name}（与当前模型的词表不同，或未找到）</translation>
    </message>
    <message>
        <source>{auto} ({n} now)</source>
        <translation>{auto}（当前 {n}）</translation>
    </message>
    <message>
        <source>Measuring; the status line shows the progress.</source>
        <translation>正在测量；状态栏显示进度。</translation>
    </message>
</context>
<context>
    <name>Sidebar</name>
    <message>
        <source>Search conversations</source>
        <translation>搜索对话</translation>
    </message>
    <message>
        <source>Conversations</source>
        <translation>对话列表</translation>
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
<context>
    <name>SoundDialog</name>
    <message>
        <source>sound</source>
        <translation>声音</translation>
    </message>
    <message>
        <source>Play</source>
        <translation>播放</translation>
    </message>
    <message>
        <source>Play it in this computer&apos;s own player</source>
        <translation>用这台电脑自带的播放器播放</translation>
    </message>
    <message>
        <source>The sound could not be played: its file is missing.</source>
        <translation>无法播放该声音：文件丢失。</translation>
    </message>
    <message>
        <source>No player on this computer opened the sound.</source>
        <translation>这台电脑上没有播放器打开该声音。</translation>
    </message>
</context>
<context>
    <name>Timeline</name>
    <message>
        <source>prompt {done} / {total} tokens ({percent} %)</source>
        <translation>提示 {done} / {total} 个词元（{percent}%）</translation>
    </message>
    <message>
        <source>{seconds} s ago</source>
        <translation>{seconds} 秒前</translation>
    </message>
    <message>
        <source>{rate} tokens/s</source>
        <translation>{rate} 词元/秒</translation>
    </message>
    <message>
        <source>queue {depth} / {bound}</source>
        <translation>队列 {depth} / {bound}</translation>
    </message>
    <message>
        <source>guessed {guessed}/s, {kept}/s kept</source>
        <translation>每秒猜测 {guessed} 个，保留 {kept} 个</translation>
    </message>
    <message>
        <source>frame {ms} ms</source>
        <translation>帧 {ms} 毫秒</translation>
    </message>
    <message>
        <source>lag {ms} ms</source>
        <translation>延迟 {ms} 毫秒</translation>
    </message>
    <message>
        <source>prompt {percent} %</source>
        <translation>提示 {percent}%</translation>
    </message>
    <message>
        <source>GPU memory {mb} MB</source>
        <translation>GPU 显存 {mb} MB</translation>
    </message>
    <message>
        <source>events</source>
        <translation>事件</translation>
    </message>
    <message>
        <source>tokens/s</source>
        <translation>词元/秒</translation>
    </message>
    <message>
        <source>queue</source>
        <translation>队列</translation>
    </message>
    <message>
        <source>ms</source>
        <translation>毫秒</translation>
    </message>
    <message>
        <source>seconds ago</source>
        <translation>秒前</translation>
    </message>
    <message>
        <source>depth</source>
        <translation>深度</translation>
    </message>
    <message>
        <source>bound</source>
        <translation>上限</translation>
    </message>
    <message>
        <source>frame cost</source>
        <translation>帧耗时</translation>
    </message>
    <message>
        <source>loop lag</source>
        <translation>循环延迟</translation>
    </message>
</context>
<context>
    <name>TraceRecording</name>
    <message>
        <source>Record a flow trace…</source>
        <translation>录制流程跟踪…</translation>
    </message>
    <message>
        <source>Record what the flow does, as a trace for Perfetto or chrome://tracing</source>
        <translation>把流程的运行录制为跟踪文件，可在 Perfetto 或 chrome://tracing 中打开</translation>
    </message>
    <message>
        <source>Record a flow trace</source>
        <translation>录制流程跟踪</translation>
    </message>
    <message>
        <source>Trace files (*.json)</source>
        <translation>跟踪文件 (*.json)</translation>
    </message>
    <message>
        <source>Flow trace written to {path}</source>
        <translation>流程跟踪已写入 {path}</translation>
    </message>
    <message>
        <source>The flow trace could not be written: {reason}</source>
        <translation>无法写入流程跟踪：{reason}</translation>
    </message>
    <message>
        <source>● Recording a flow trace ({time})</source>
        <translation>● 正在录制流程跟踪（{time}）</translation>
    </message>
    <message>
        <source>View &gt; Record a flow trace… again to stop</source>
        <translation>再次选择 视图 &gt; 录制流程跟踪… 即可停止</translation>
    </message>
    <message>
        <source>Writing the flow trace…</source>
        <translation>正在写入流程跟踪…</translation>
    </message>
</context>
<context>
    <name>Transcript</name>
    <message>
        <source>{tokens} tokens</source>
        <translation>{tokens} 个词元</translation>
    </message>
    <message>
        <source>cut</source>
        <translation>已截短</translation>
    </message>
    <message>
        <source>Show this picture</source>
        <translation>显示这张图片</translation>
    </message>
    <message>
        <source>Attached picture {name}</source>
        <translation>附加的图片 {name}</translation>
    </message>
    <message>
        <source>Show this sound, to play it</source>
        <translation>显示这段声音，以便播放</translation>
    </message>
    <message>
        <source>Attached sound {name}</source>
        <translation>附加的声音 {name}</translation>
    </message>
    <message>
        <source>Show the text of this attached file</source>
        <translation>显示此附件的文字</translation>
    </message>
    <message>
        <source>Attached file {name}</source>
        <translation>附件 {name}</translation>
    </message>
</context>
<context>
    <name>WindowMenus</name>
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
        <source>Clear the &amp;prompt cache</source>
        <translation>清空提示缓存(&amp;P)</translation>
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
        <source>&amp;Attach files…</source>
        <translation>附加文件(&amp;A)…</translation>
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
</context>
</TS>
