import asyncio
import json
import os

from unieval_local.compat import SummarizationEvaluator, SummaryData, load_simple_summarization_dataset


async def main():
    """Main function."""
    data = load_simple_summarization_dataset()
    data = data.load()
    data = SummaryData(
        input=data[0]["input"],
        summary=data[0]["summary"],
    )

    evaluator = SummarizationEvaluator(
        model_credentials=os.getenv("GOOGLE_API_KEY"),
    )
    result = await evaluator.evaluate(data)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
